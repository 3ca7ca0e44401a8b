/*
 * pool_heap.c - telling Windows' two process heaps apart by their header.
 *
 * Portable, so the parser runs in every build's tests and under the
 * sanitizers; pool_win.c hands it the live header. Both heaps start with a
 * 32-bit signature at offset 0x10 on x64:
 *
 * - the NT heap's _HEAP begins with its first _HEAP_SEGMENT: a _HEAP_ENTRY
 *   (16 bytes on x64), then SegmentSignature 0xFFEEFFEE (see the _HEAP
 *   layouts at terminus.rewolf.pl/terminus/structures/ntdll/_HEAP_combined.html,
 *   x64 offset 0x0010, and HEAP_SEGMENT_SIGNATURE in System Informer's
 *   phnt heapstruct.h);
 * - the segment heap's _SEGMENT_HEAP begins with an RTL_HP_ENV_HANDLE (two
 *   pointers, 16 bytes on x64; see ntdiff/headers' Windows 10 ntdll
 *   structures), then Signature 0xDDEEDDEE (M. V. Yason, "Windows 10
 *   Segment Heap Internals", Black Hat USA 2016; the debugger helpers of
 *   MiniDumpExplorer name both values SegmentSignatureNtHeap and
 *   SegmentSignatureSegmentHeap).
 *
 * Anything else (another heap implementation, such as wine's when it does
 * not mimic the NT heap) is reported as unknown, and the probe takes the
 * safe side of the policy: the NT heap's rule.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#define HEAP_SIGNATURE_AT      0x10u
#define NT_HEAP_SIGNATURE      0xFFEEFFEEu
#define SEGMENT_HEAP_SIGNATURE 0xDDEEDDEEu

int kiln__pool_heap_kind(const void *header, size_t n, enum kiln_heap_kind *kind,
                         uint32_t *signature)
{
    *kind = KILN_HEAP_DEFAULT;
    if (signature)
        *signature = 0;
    if (!header || n < HEAP_SIGNATURE_AT + 4)
        return KILN_EINVAL;
    uint32_t sig = kiln__load_le32((const unsigned char *)header + HEAP_SIGNATURE_AT);
    if (signature)
        *signature = sig;
    if (sig == NT_HEAP_SIGNATURE)
        *kind = KILN_HEAP_NT;
    else if (sig == SEGMENT_HEAP_SIGNATURE)
        *kind = KILN_HEAP_SEGMENT;
    else
        return KILN_ENOTFOUND;
    return KILN_OK;
}
