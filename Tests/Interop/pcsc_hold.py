"""Another program holding a PC/SC reader: connects exclusively through libpcsclite (ctypes, no
pyscard needed) and keeps the connection until stdin closes. Prints "held" once connected.

    PCSCLITE_CSOCK_NAME=/path/pcscd.comm python3 pcsc_hold.py "Cardbench PCD 00 00"
"""
import ctypes
import sys

lib = ctypes.CDLL("libpcsclite.so.1")
# Linux: LONG is long, DWORD unsigned long, SCARDCONTEXT and SCARDHANDLE are LONG.
context = ctypes.c_long()
rv = lib.SCardEstablishContext(ctypes.c_ulong(2), None, None, ctypes.byref(context))
if rv != 0:
    print(f"SCardEstablishContext: {rv:#x}", flush=True)
    sys.exit(2)
handle = ctypes.c_long()
protocol = ctypes.c_ulong()
SHARE_EXCLUSIVE, T0_OR_T1 = 1, 3
rv = lib.SCardConnect(context, sys.argv[1].encode(), ctypes.c_ulong(SHARE_EXCLUSIVE), ctypes.c_ulong(T0_OR_T1),
                      ctypes.byref(handle), ctypes.byref(protocol))
if rv != 0:
    print(f"SCardConnect: {rv & 0xFFFFFFFF:#x}", flush=True)
    sys.exit(1)
print("held", flush=True)
sys.stdin.read()
lib.SCardDisconnect(handle, ctypes.c_ulong(0))
lib.SCardReleaseContext(context)
