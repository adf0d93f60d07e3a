#ifndef ISLET_OPENSSL_H
#define ISLET_OPENSSL_H
#include <stddef.h>
#include <stdint.h>

/// SHA-256 of `length` bytes into `digest` (32 bytes). Returns 1 on success.
int islet_sha256(const void *bytes, size_t length, uint8_t digest[32]);

/// Fills `buffer` with `length` cryptographically secure random bytes. Returns 1 on success.
int islet_random_bytes(uint8_t *buffer, size_t length);

/// Checks that `pem` holds a PKCS#8 P-256 private key, as Apple's .p8 APNs keys are.
/// Returns 0 when it does, 1 when it is not a readable private key, 2 when it is not P-256.
int islet_check_p256_private_key(const char *pem, size_t length);

#endif
