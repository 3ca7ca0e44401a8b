/*
 * cli_os_win.c - what the kiln command asks of the system that differs
 * between platforms (cli.h, "the system"), on Windows.
 */
#include "cli.h"

#include <direct.h>
#include <windows.h>

int cli_os_make_dir(const char *dir)
{
    return _mkdir(dir);
}

int cli_os_remove_dir(const char *dir)
{
    return _rmdir(dir);
}

const char *cli_os_null_device(void)
{
    return "NUL";
}

bool cli_os_self_exe(char *out, size_t cap)
{
    /* The wide name, as UTF-8: the ANSI one cannot spell every path. */
    static wchar_t wexe[CLI_PATH_MAX];
    DWORD n = GetModuleFileNameW(NULL, wexe, CLI_PATH_MAX);
    return n > 0 && n < CLI_PATH_MAX &&
           WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wexe, -1, out, (int)cap, NULL, NULL) >
               0;
}
