// libpcsclite (Debian's libpcsclite-dev): the PC/SC API pcscd serves.
//
// The headers live in /usr/include/PCSC and include each other as <pcsclite.h> and <wintypes.h>,
// which is why pkg-config adds -I/usr/include/PCSC. A SwiftPM system library taking that from
// pkg-config also takes its "-pthread", which SwiftPM warns about on every build; the two
// forwarding headers beside this one resolve those includes instead, with no flag at all.
#ifndef CLIBPCSCLITE_H
#define CLIBPCSCLITE_H
#include <PCSC/winscard.h>

// SCARD_PCI_T0 and SCARD_PCI_T1 are macros over the library's globals, which Swift cannot import.
static inline const SCARD_IO_REQUEST *cardbench_pci_t0(void) { return &g_rgSCardT0Pci; }
static inline const SCARD_IO_REQUEST *cardbench_pci_t1(void) { return &g_rgSCardT1Pci; }
#endif
