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
/// AES-256-GCM: seals `length` bytes with `key` (32 bytes) and `nonce` (12 bytes) into `out` (same length)
/// and `tag` (16 bytes), the tag also covering `aad_length` bytes of associated data (none when 0). Returns 1 on success.
int islet_aes256gcm_seal(const uint8_t key[32], const uint8_t nonce[12], const void *aad, size_t aad_length,
                         const void *plaintext, size_t length, uint8_t *out, uint8_t tag[16]);
/// Opens what islet_aes256gcm_seal made with the same associated data; returns 1 when the tag matches (the bytes
/// and the associated data are authentic), else 0.
int islet_aes256gcm_open(const uint8_t key[32], const uint8_t nonce[12], const void *aad, size_t aad_length,
                         const void *ciphertext, size_t length, const uint8_t tag[16], uint8_t *out);

#include <openssl/ssl.h>
#include <openssl/evp.h>

/// A TLS 1.2+ client context offering ALPN h2, verifying peers against the system CAs plus `ca_file` (may be NULL).
SSL_CTX *islet_tls_client_context(const char *ca_file, char *error, int error_length);
/// A TLS 1.2+ server context selecting ALPN h2, with a PEM certificate chain and key.
SSL_CTX *islet_tls_server_context(const char *certificate_file, const char *key_file, char *error, int error_length);
/// A client session on a connected fd, checking the peer's name (DNS name or IP address) and sending SNI.
SSL *islet_tls_client(SSL_CTX *context, int fd, const char *host);
SSL *islet_tls_server(SSL_CTX *context, int fd);

/// Results of the non-blocking calls below.
enum { ISLET_TLS_WANT_READ = -1, ISLET_TLS_WANT_WRITE = -2, ISLET_TLS_ERROR = -3, ISLET_TLS_CLOSED = 0 };
/// 1 when done, or one of the ISLET_TLS_ values.
int islet_tls_handshake(SSL *ssl);
/// Bytes read (> 0) or one of the ISLET_TLS_ values.
int islet_tls_read(SSL *ssl, void *buffer, int length);
/// Bytes written (> 0) or one of the ISLET_TLS_ values.
int islet_tls_write(SSL *ssl, const void *buffer, int length);
/// 1 when the peer agreed to HTTP/2.
int islet_tls_alpn_h2(SSL *ssl);
/// The last OpenSSL error as text (clears the queue).
void islet_tls_error(char *buffer, int length);

/// Writes a self-signed P-256 certificate for 127.0.0.1, ::1 and localhost, and its key (mode 0600). 1 on success.
int islet_tls_self_signed(const char *certificate_file, const char *key_file, int days);

/// A new P-256 private key as PKCS#8 PEM (the .p8 format) into `buffer`; returns its length, 0 on failure.
int islet_p256_generate_pem(char *buffer, int length);

/// A P-256 private key from PEM (an APNs .p8); NULL when unreadable.
EVP_PKEY *islet_p256_key(const char *pem, size_t length);
void islet_key_free(EVP_PKEY *key);
/// ES256: SHA-256 + ECDSA over `data`, as the raw 64-byte r||s a JWT carries. 1 on success.
int islet_es256_sign(EVP_PKEY *key, const void *data, size_t length, uint8_t signature[64]);
/// 1 when `signature` (raw r||s) is the key's ES256 signature of `data`.
int islet_es256_verify(EVP_PKEY *key, const void *data, size_t length, const uint8_t signature[64]);

/// A new RSA private key of `bits` as PKCS#8 PEM (a Google service account's form) into `buffer`; its length, 0 on failure.
int islet_rsa_generate_pem(int bits, char *buffer, int length);
/// An RSA private key of 2,048 bits or more from PEM (PKCS#8 or PKCS#1); NULL when unreadable, not RSA or shorter.
EVP_PKEY *islet_rsa_key(const char *pem, size_t length);
/// RS256: RSASSA-PKCS1-v1_5 with SHA-256 over `data` into `signature` (room for `*signature_length` bytes, the key's
/// size); sets `*signature_length`. 1 on success.
int islet_rs256_sign(EVP_PKEY *key, const void *data, size_t length, uint8_t *signature, size_t *signature_length);
/// 1 when `signature` is the key's RS256 signature of `data`.
int islet_rs256_verify(EVP_PKEY *key, const void *data, size_t length, const uint8_t *signature, size_t signature_length);
/// The key's size in bytes (an RS256 signature's length).
int islet_key_size(EVP_PKEY *key);
#endif
