// cardbench uses libcrypto for the DES block cipher (TDES keys of EMV: ICC master keys, session
// keys, retail MACs) and for raw RSA (offline data authentication, EMV Book 2). OpenSSL 3 marks
// the DES key-schedule API deprecated in favour of EVP, but EVP's per-key context set-up costs
// more than the whole EMV computation: the key schedule API is still shipped and supported in
// Debian's libcrypto, so it is used on purpose. RSA goes through BIGNUM's modular exponentiation
// (EMV's recovery is unpadded RSA) and EVP key generation, neither deprecated.
#ifndef CARDBENCH_CLIBCRYPTO_SHIM_H
#define CARDBENCH_CLIBCRYPTO_SHIM_H
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/des.h>
#include <openssl/crypto.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#endif
