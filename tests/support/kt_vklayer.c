/*
 * kt_vklayer.c - the Khronos validation layer for tests (kt_vklayer.h).
 * The loader reads VK_INSTANCE_LAYERS at each vkCreateInstance, and the
 * layer its settings file (VK_LAYER_SETTINGS_PATH) when an instance loads
 * it, so both apply to instances made after kt_validation_begin, in this
 * process and in the programs it starts.
 */
#include "kt_vklayer.h"

#include "kiln_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool kt_have_validation_layer(void)
{
    static const char *const dirs[] = {"/usr/share/vulkan/explicit_layer.d",
                                       "/usr/local/share/vulkan/explicit_layer.d",
                                       "/etc/vulkan/explicit_layer.d"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof(p), "%s/VkLayer_khronos_validation.json", dirs[i]);
        if (stat(p, &st) == 0)
            return true;
    }
    return false;
}

bool kt_validation_begin(const char *dir, char *log, size_t cap)
{
    if (!kt_have_validation_layer())
        return false;
    char settings[4200];
    snprintf(settings, sizeof(settings), "%s/vk_layer_settings.txt", dir);
    snprintf(log, cap, "%s/validation.log", dir);
    FILE *f = fopen(settings, "w");
    if (!f) {
        kt_fail(__FILE__, __LINE__, "cannot write %s", settings);
        return false;
    }
    fprintf(f,
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
            "khronos_validation.log_filename = %s\n"
            "khronos_validation.report_flags = error\n",
            log);
    if (fclose(f) != 0) {
        kt_fail(__FILE__, __LINE__, "cannot write %s", settings);
        return false;
    }
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    setenv("VK_LAYER_SETTINGS_PATH", settings, 1);
    return true;
}

void kt_validation_end(void)
{
    unsetenv("VK_INSTANCE_LAYERS");
    unsetenv("VK_LAYER_SETTINGS_PATH");
}

int kt_occurrences(const char *path, const char *text)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    int count = 0;
    for (const char *p = buf; (p = strstr(p, text)) != NULL; p += strlen(text))
        count++;
    return count;
}

int kt_validation_errors(const char *log)
{
    int errors = kt_occurrences(log, "Validation Error:");
    if (errors) {
        char cmd[4400];
        snprintf(cmd, sizeof(cmd), "head -c 3000 '%s'", log);
        if (system(cmd) != 0)
            printf("(could not show %s)\n", log);
    }
    return errors;
}
