/*
 * cli_os_unix.c - what the kiln command asks of the system that differs
 * between platforms (cli.h, "the system"), on POSIX systems.
 */
#include "cli.h"

#include <sys/stat.h>
#include <unistd.h>

int cli_os_make_dir(const char *dir)
{
    return mkdir(dir, 0777);
}

int cli_os_remove_dir(const char *dir)
{
    return rmdir(dir);
}

const char *cli_os_null_device(void)
{
    return "/dev/null";
}

bool cli_os_self_exe(char *out, size_t cap)
{
    if (cap < 2)
        return false;
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        return false;
    out[n] = '\0';
    return true;
}
