#version 450
// The example's vertex stage: a 2D position and a color per vertex (the
// vertex input its pipelines describe), moved by a matrix in push constants.
layout(location = 0) in vec2 pos;
layout(location = 1) in vec3 color;
layout(location = 0) out vec3 v_color;
layout(push_constant) uniform Push { mat4 mvp; };
void main()
{
    gl_Position = mvp * vec4(pos, 0.0, 1.0);
    v_color = color;
}
