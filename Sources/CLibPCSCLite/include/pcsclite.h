// Forwards winscard.h's <pcsclite.h> to the real header (see CLibPCSCLite.h).
#include <PCSC/pcsclite.h>
