// ProcessPrng, the one export of bcryptprimitives.dll that Rust's standard library (1.78 and
// later) imports on Windows for its random numbers (HashMap keys). Windows 10 has the DLL; wine
// 8.0 (Debian 12) does not, so the addon would not load there. scripts/build-windows.sh builds
// this stand-in into the wine prefix only: it is never shipped, and on Windows the system's DLL
// is the one loaded. It draws from RtlGenRandom (advapi32's SystemFunction036), which wine has.
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    length -= chunk;
  }
  return TRUE;
}
