// cardbench uses libcrypto for the DES block cipher only (TDES keys of EMV: ICC master keys,
// session keys, retail MACs). OpenSSL 3 marks the DES key-schedule API deprecated in favour of
// EVP, but EVP's per-key context set-up costs more than the whole EMV computation: the key
// schedule API is still shipped and supported in Debian's libcrypto, so it is used on purpose.
#ifndef CARDBENCH_CLIBCRYPTO_SHIM_H
#define CARDBENCH_CLIBCRYPTO_SHIM_H
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/des.h>
#include <openssl/crypto.h>
#endif
