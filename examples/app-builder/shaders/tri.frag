#version 450
// The example's fragment stage: the vertex color, with an alpha the
// blending state uses (a specialization constant, so each pipeline can
// set its own).
layout(constant_id = 0) const float ALPHA = 1.0;
layout(location = 0) in vec3 v_color;
layout(location = 0) out vec4 o_color;
void main()
{
    o_color = vec4(v_color, ALPHA);
}
