#include <kiln/common.h>

#include <stdio.h>

int main(void)
{
    printf("kiln %s\n", kiln_version_string());
    return kiln_version() == KILN_VERSION_NUMBER ? 0 : 1;
}
