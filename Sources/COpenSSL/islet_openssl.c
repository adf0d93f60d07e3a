#include "islet_openssl.h"
#include <string.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/core_names.h>

int islet_sha256(const void *bytes, size_t length, uint8_t digest[32]) {
    unsigned int out = 0;
    return EVP_Digest(bytes, length, digest, &out, EVP_sha256(), NULL) == 1 && out == 32;
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
