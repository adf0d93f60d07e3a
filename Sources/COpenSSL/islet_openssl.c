#include <pthread.h>
#include "islet_openssl.h"
#include <string.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/core_names.h>

/* Fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up again on every call, which costs
   more than hashing the few bytes of an apns-id. */
static EVP_MD *islet_sha256_md = NULL;
static pthread_once_t islet_sha256_once = PTHREAD_ONCE_INIT;
static void islet_sha256_fetch(void) { islet_sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }

int islet_sha256(const void *bytes, size_t length, uint8_t digest[32]) {
    pthread_once(&islet_sha256_once, islet_sha256_fetch);
    unsigned int out = 0;
    const EVP_MD *md = islet_sha256_md != NULL ? islet_sha256_md : EVP_sha256();
    return EVP_Digest(bytes, length, digest, &out, md, NULL) == 1 && out == 32;
}

int islet_random_bytes(uint8_t *buffer, size_t length) {
    return RAND_bytes(buffer, (int)length) == 1;
}

int islet_check_p256_private_key(const char *pem, size_t length) {
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return 1;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (key == NULL) return 1;
    char group[64] = {0};
    size_t group_length = 0;
    int ok = EVP_PKEY_is_a(key, "EC")
        && EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &group_length) == 1
        && strcmp(group, "prime256v1") == 0;
    EVP_PKEY_free(key);
    return ok ? 0 : 2;
}

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <sys/stat.h>
#include <arpa/inet.h>

static void last_error(char *buffer, int length) {
    unsigned long code = ERR_get_error();
    if (code == 0) snprintf(buffer, length, "unknown TLS error");
    else ERR_error_string_n(code, buffer, length);
    ERR_clear_error();
}

void islet_tls_error(char *buffer, int length) { last_error(buffer, length); }

static const unsigned char h2_alpn[] = { 2, 'h', '2' };

SSL_CTX *islet_tls_client_context(const char *ca_file, char *error, int error_length) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) { last_error(error, error_length); return NULL; }
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_alpn_protos(context, h2_alpn, sizeof h2_alpn);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_default_verify_paths(context);
    if (ca_file != NULL && SSL_CTX_load_verify_locations(context, ca_file, NULL) != 1) {
        last_error(error, error_length);
        SSL_CTX_free(context);
        return NULL;
    }
    return context;
}

static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in,
                     unsigned int in_length, void *argument) {
    (void)ssl; (void)argument;
    for (unsigned int i = 0; i + 2 < in_length + 1 && i < in_length; i += 1 + in[i]) {
        if (in[i] == 2 && i + 2 < in_length && in[i + 1] == 'h' && in[i + 2] == '2') {
            *out = &in[i + 1];
            *out_length = 2;
            return SSL_TLSEXT_ERR_OK;
        }
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

SSL_CTX *islet_tls_server_context(const char *certificate_file, const char *key_file, char *error, int error_length) {
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    if (context == NULL) { last_error(error, error_length); return NULL; }
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_alpn_select_cb(context, select_h2, NULL);
    if (SSL_CTX_use_certificate_chain_file(context, certificate_file) != 1
        || SSL_CTX_use_PrivateKey_file(context, key_file, SSL_FILETYPE_PEM) != 1) {
        last_error(error, error_length);
        SSL_CTX_free(context);
        return NULL;
    }
    return context;
}

SSL *islet_tls_client(SSL_CTX *context, int fd, const char *host) {
    SSL *ssl = SSL_new(context);
    if (ssl == NULL) return NULL;
    SSL_set_fd(ssl, fd);
    unsigned char address[16];
    if (inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    } else {
        SSL_set_tlsext_host_name(ssl, host);
        SSL_set1_host(ssl, host);
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

SSL *islet_tls_server(SSL_CTX *context, int fd) {
    SSL *ssl = SSL_new(context);
    if (ssl == NULL) return NULL;
    SSL_set_fd(ssl, fd);
    SSL_set_accept_state(ssl);
    return ssl;
}

static int outcome(SSL *ssl, int result) {
    switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ: return ISLET_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return ISLET_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return ISLET_TLS_CLOSED;
    default: return ISLET_TLS_ERROR;
    }
}

int islet_tls_handshake(SSL *ssl) {
    int result = SSL_do_handshake(ssl);
    return result == 1 ? 1 : outcome(ssl, result);
}

int islet_tls_read(SSL *ssl, void *buffer, int length) {
    int result = SSL_read(ssl, buffer, length);
    return result > 0 ? result : outcome(ssl, result);
}

int islet_tls_write(SSL *ssl, const void *buffer, int length) {
    int result = SSL_write(ssl, buffer, length);
    return result > 0 ? result : outcome(ssl, result);
}

int islet_tls_alpn_h2(SSL *ssl) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl, &protocol, &length);
    return length == 2 && protocol[0] == 'h' && protocol[1] == '2';
}

int islet_tls_self_signed(const char *certificate_file, const char *key_file, int days) {
    int ok = 0;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *certificate = X509_new();
    FILE *out = NULL;
    if (key == NULL || certificate == NULL) goto done;
    X509_set_version(certificate, 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *number = BN_bin2bn(serial, sizeof serial, NULL);
    BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate));
    BN_free(number);
    X509_gmtime_adj(X509_getm_notBefore(certificate), -3600);
    X509_gmtime_adj(X509_getm_notAfter(certificate), (long)days * 86400);
    X509_set_pubkey(certificate, key);
    X509_NAME *name = X509_get_subject_name(certificate);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"Islet APNs simulator", -1, -1, 0);
    X509_set_issuer_name(certificate, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, certificate, certificate, NULL, NULL, 0);
    const char *extensions[][2] = {
        { "subjectAltName", "IP:127.0.0.1,IP:::1,DNS:localhost" },
        { "basicConstraints", "critical,CA:TRUE" },
        { "keyUsage", "critical,digitalSignature,keyCertSign" },
        { "extendedKeyUsage", "serverAuth" },
    };
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
        X509_EXTENSION *extension = X509V3_EXT_conf(NULL, &v3, extensions[i][0], extensions[i][1]);
        if (extension == NULL) goto done;
        X509_add_ext(certificate, extension, -1);
        X509_EXTENSION_free(extension);
    }
    if (X509_sign(certificate, key, EVP_sha256()) == 0) goto done;
    out = fopen(key_file, "w");
    if (out == NULL) goto done;
    chmod(key_file, 0600);
    if (PEM_write_PrivateKey(out, key, NULL, NULL, 0, NULL, NULL) != 1) goto done;
    fclose(out);
    out = fopen(certificate_file, "w");
    if (out == NULL || PEM_write_X509(out, certificate) != 1) goto done;
    ok = 1;
done:
    if (out != NULL) fclose(out);
    X509_free(certificate);
    EVP_PKEY_free(key);
    return ok;
}

EVP_PKEY *islet_p256_key(const char *pem, size_t length) {
    if (islet_check_p256_private_key(pem, length) != 0) return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    EVP_PKEY *key = bio == NULL ? NULL : PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return key;
}

void islet_key_free(EVP_PKEY *key) { EVP_PKEY_free(key); }

int islet_es256_sign(EVP_PKEY *key, const void *data, size_t length, uint8_t signature[64]) {
    unsigned char der[80];
    size_t der_length = sizeof der;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int ok = context != NULL
        && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(context, der, &der_length, data, length) == 1;
    EVP_MD_CTX_free(context);
    if (!ok) return 0;
    const unsigned char *cursor = der;
    ECDSA_SIG *parsed = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
    if (parsed == NULL) return 0;
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(parsed, &r, &s);
    ok = BN_bn2binpad(r, signature, 32) == 32 && BN_bn2binpad(s, signature + 32, 32) == 32;
    ECDSA_SIG_free(parsed);
    return ok;
}

int islet_es256_verify(EVP_PKEY *key, const void *data, size_t length, const uint8_t signature[64]) {
    ECDSA_SIG *parsed = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(signature, 32, NULL), *s = BN_bin2bn(signature + 32, 32, NULL);
    if (parsed == NULL || r == NULL || s == NULL) { ECDSA_SIG_free(parsed); BN_free(r); BN_free(s); return 0; }
    ECDSA_SIG_set0(parsed, r, s);
    unsigned char *der = NULL;
    int der_length = i2d_ECDSA_SIG(parsed, &der);
    ECDSA_SIG_free(parsed);
    if (der_length <= 0) return 0;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int ok = context != NULL
        && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestVerify(context, der, der_length, data, length) == 1;
    EVP_MD_CTX_free(context);
    OPENSSL_free(der);
    return ok;
}

/* Writes `key` as PKCS#8 PEM into `buffer`, NUL-terminated, and frees it; the PEM's length, 0 on failure. */
static int islet_take_pem(EVP_PKEY *key, char *buffer, int length) {
    BIO *bio = BIO_new(BIO_s_mem());
    int written = 0;
    if (key != NULL && bio != NULL && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        written = BIO_read(bio, buffer, length - 1);
        if (written < 0) written = 0;
        buffer[written] = 0;
    }
    BIO_free(bio);
    EVP_PKEY_free(key);
    return written;
}

int islet_p256_generate_pem(char *buffer, int length) {
    return islet_take_pem(EVP_EC_gen("P-256"), buffer, length);
}

int islet_aes256gcm_seal(const uint8_t key[32], const uint8_t nonce[12], const void *aad, size_t aad_length,
                         const void *plaintext, size_t length, uint8_t *out, uint8_t tag[16]) {
    if (length > INT32_MAX || aad_length > INT32_MAX) return 0;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return 0;
    int written = 0, final_length = 0, aad_written = 0;
    int ok = EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && EVP_EncryptInit_ex(context, NULL, NULL, key, nonce) == 1
        && (aad_length == 0 || EVP_EncryptUpdate(context, NULL, &aad_written, aad, (int)aad_length) == 1)
        && (length == 0 || EVP_EncryptUpdate(context, out, &written, plaintext, (int)length) == 1)
        && EVP_EncryptFinal_ex(context, out + written, &final_length) == 1
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
    EVP_CIPHER_CTX_free(context);
    return ok ? 1 : 0;
}

int islet_aes256gcm_open(const uint8_t key[32], const uint8_t nonce[12], const void *aad, size_t aad_length,
                         const void *ciphertext, size_t length, const uint8_t tag[16], uint8_t *out) {
    if (length > INT32_MAX || aad_length > INT32_MAX) return 0;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return 0;
    int written = 0, final_length = 0, aad_written = 0;
    int ok = EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && EVP_DecryptInit_ex(context, NULL, NULL, key, nonce) == 1
        && (aad_length == 0 || EVP_DecryptUpdate(context, NULL, &aad_written, aad, (int)aad_length) == 1)
        && (length == 0 || EVP_DecryptUpdate(context, out, &written, ciphertext, (int)length) == 1)
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1
        && EVP_DecryptFinal_ex(context, out + written, &final_length) == 1;
    EVP_CIPHER_CTX_free(context);
    return ok ? 1 : 0;
}

int islet_rsa_generate_pem(int bits, char *buffer, int length) {
    return islet_take_pem(EVP_RSA_gen((unsigned int)bits), buffer, length);
}

EVP_PKEY *islet_rsa_key(const char *pem, size_t length) {
    if (length > INT32_MAX) return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    EVP_PKEY *key = bio == NULL ? NULL : PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (key != NULL && (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA || EVP_PKEY_get_bits(key) < 2048)) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
}

int islet_key_size(EVP_PKEY *key) { return EVP_PKEY_get_size(key); }

int islet_rs256_sign(EVP_PKEY *key, const void *data, size_t length, uint8_t *signature, size_t *signature_length) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int ok = context != NULL
        && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(context, signature, signature_length, data, length) == 1;
    EVP_MD_CTX_free(context);
    return ok;
}

int islet_rs256_verify(EVP_PKEY *key, const void *data, size_t length, const uint8_t *signature, size_t signature_length) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int ok = context != NULL
        && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestVerify(context, signature, signature_length, data, length) == 1;
    EVP_MD_CTX_free(context);
    return ok;
}
