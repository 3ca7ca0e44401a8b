/*
 * cli_stop_win.c - the console events and the watchdog of cli_stop.c on
 * Windows.
 *
 * Invariants and why they hold:
 *
 * - Ctrl-C, Ctrl-Break and the console's close are the requests (Windows
 *   sends no SIGTERM). The system calls the handler on a thread of its own,
 *   so it may set an event; a second request returns FALSE, and the
 *   default handler ends the process at once.
 *
 * - The watchdog is a thread of its own, waiting on that event; at the
 *   deadline it writes its line and ends the process with
 *   TerminateProcess: no DLL detach, which could wait on the loader lock a
 *   stuck thread holds.
 */
#include "cli.h"
#include "cli_stop_internal.h"

#include <string.h>
#include <windows.h>

static HANDLE wake;

static BOOL WINAPI on_console(DWORD type)
{
    if (type != CTRL_C_EVENT && type != CTRL_BREAK_EVENT && type != CTRL_CLOSE_EVENT)
        return FALSE;
    switch (cli__stop_signal()) {
    case CLI__STOP_FIRST:
        SetEvent(wake);
        return TRUE;
    case CLI__STOP_ECHO:
        return TRUE;
    default:
        return FALSE; /* the default handler ends the process */
    }
}

static DWORD WINAPI watchdog(LPVOID arg)
{
    (void)arg;
    WaitForSingleObject(wake, INFINITE);
    uint64_t ms = cli__stop_deadline_ms();
    Sleep(ms > 0xfffffffeu ? 0xfffffffeu : (DWORD)ms);
    const char *line = cli__stop_line();
    HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
    DWORD done = 0;
    if (err && err != INVALID_HANDLE_VALUE)
        WriteFile(err, line, (DWORD)strlen(line), &done, NULL);
    TerminateProcess(GetCurrentProcess(),
                     cli_stop_by_signal() ? KILN_EXIT_SIGNAL : KILN_EXIT_FAILED);
    return 0;
}

void cli__stop_platform_install(void)
{
    wake = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (!wake)
        return; /* no watchdog: the console events keep their default */
    HANDLE t = CreateThread(NULL, 0, watchdog, NULL, 0, NULL);
    if (!t)
        return;
    CloseHandle(t);
    SetConsoleCtrlHandler(on_console, TRUE);
}

void cli__stop_arm(void)
{
    SetEvent(wake);
}
