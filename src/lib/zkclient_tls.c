/*
 * zkclient_tls.c - TLS to ZooKeeper: the one file compiled twice. Built
 * without ZKE_WITH_TLS (libzkelect, zkelect: Debian's libzookeeper-st, which
 * has no OpenSSL) it refuses every TLS setting; with it (zkelect-tls,
 * cmake -DZKELECT_TLS=ON: the client compiled with OpenSSL from Debian's
 * source, cmake/zookeeper/ZooKeeperTLS.cmake) it checks the files with
 * OpenSSL and opens handles with zookeeper_init_ssl2 (zkelect-tls.patch: the
 * same as zookeeper_init_ssl, with the log callback).
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"
#include "xstr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZKE_WITH_TLS
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#endif

#ifndef ZKE_WITH_TLS

int zke_tls_supported(void)
{
    return 0;
}

int zke_check_tls(const struct zke_tls *tls, int64_t *not_after, char *err, size_t errlen)
{
    (void)tls;
    if (not_after != NULL)
        *not_after = 0;
    snprintf(err, errlen, "TLS to ZooKeeper: this build has no TLS (Debian's ZooKeeper client "
             "is built without OpenSSL; zkelect-tls is: docs/operations.md \"TLS to ZooKeeper\")");
    return -1;
}

int zkclient_set_tls(zkclient *s, const struct zke_tls *tls)
{
    if (tls == NULL)
        return 0;
    return zke_check_tls(tls, NULL, s->err, sizeof s->err);
}

zhandle_t *zkc_init_handle(zkclient *s, watcher_fn w, log_callback_fn log)
{
    return zookeeper_init2(s->hosts, w, s->timeout_ms, NULL, s, ZOO_NO_LOG_CLIENTENV, log);
}

#else

int zke_tls_supported(void)
{
    return 1;
}

/* The cert string is "ca,cert,key[,password]": no member may hold a ','. */
static int check_names(const struct zke_tls *t, char *err, size_t errlen)
{
    const char *what[] = { "CA file", "certificate file", "key file" };
    const char *v[] = { t->ca, t->cert, t->key };
    for (int i = 0; i < 3; i++) {
        if (v[i] == NULL || v[i][0] == '\0') {
            snprintf(err, errlen, "TLS needs a %s (--zk-tls-ca, --zk-tls-cert and --zk-tls-key "
                     "together)", what[i]);
            return -1;
        }
        if (strchr(v[i], ',') != NULL) {
            snprintf(err, errlen, "TLS %s '%.200s' has a ',' (the ZooKeeper client's separator)",
                     what[i], v[i]);
            return -1;
        }
    }
    if (t->key_password != NULL && strchr(t->key_password, ',') != NULL) {
        snprintf(err, errlen, "the TLS key's password has a ',' (the ZooKeeper client's separator)");
        return -1;
    }
    return 0;
}

/* PEM's password callback: the password given, never a prompt */
static int pem_password(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    if (pw == NULL)
        return -1;
    size_t n = strlen(pw);
    if (size <= 0 || n >= (size_t)size)
        return -1;
    snprintf(buf, (size_t)size, "%s", pw);
    return (int)n;
}

static X509 *read_cert(const char *path, const char *what, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "TLS %s %.200s: %s", what, path, strerror(errno));
        return NULL;
    }
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (x == NULL)
        snprintf(err, errlen, "TLS %s %.200s: no PEM certificate in it", what, path);
    return x;
}

static int64_t asn1_seconds(const ASN1_TIME *t)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    /* days since 1970-01-01 of the UTC date (no timegm in C11/POSIX) */
    int y = tm.tm_year + 1900, m = tm.tm_mon + 1;
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + tm.tm_mday - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    return days * 86400 + (int64_t)tm.tm_hour * 3600 + (int64_t)tm.tm_min * 60 + tm.tm_sec;
}

/* One piece: each step's failure is its own message, in the order a
 * reader checks them (file, certificate, dates, key, the pair). */
int zke_check_tls(const struct zke_tls *t, int64_t *not_after, char *err, size_t errlen)
{
    if (not_after != NULL)
        *not_after = 0;
    if (t == NULL)
        return 0;
    if (check_names(t, err, errlen) != 0)
        return -1;
    X509 *ca = read_cert(t->ca, "CA file", err, errlen);
    if (ca == NULL)
        return -1;
    X509_free(ca);
    X509 *x = read_cert(t->cert, "certificate", err, errlen);
    if (x == NULL)
        return -1;
    int rc = -1;
    EVP_PKEY *k = NULL;
    if (not_after != NULL)
        *not_after = asn1_seconds(X509_get0_notAfter(x));
    if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
        snprintf(err, errlen, "TLS certificate %.200s expired (not after %lld, Unix seconds)",
                 t->cert, (long long)asn1_seconds(X509_get0_notAfter(x)));
        goto out;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(x)) >= 0) {
        snprintf(err, errlen, "TLS certificate %.200s is not valid yet", t->cert);
        goto out;
    }
    FILE *f = fopen(t->key, "r");
    if (f == NULL) {
        snprintf(err, errlen, "TLS key file %.200s: %s", t->key, strerror(errno));
        goto out;
    }
    k = PEM_read_PrivateKey(f, NULL, pem_password, (void *)t->key_password);
    fclose(f);
    if (k == NULL) {
        snprintf(err, errlen, "TLS key file %.200s: no PEM private key in it%s", t->key,
                 t->key_password == NULL ? " (an encrypted one needs its password)"
                                         : " (or not this password)");
        goto out;
    }
    if (X509_check_private_key(x, k) != 1) {
        snprintf(err, errlen, "TLS key file %.200s is not the key of certificate %.200s", t->key,
                 t->cert);
        goto out;
    }
    rc = 0;
out:
    ERR_clear_error();
    EVP_PKEY_free(k);
    X509_free(x);
    return rc;
}

int zkclient_set_tls(zkclient *s, const struct zke_tls *t)
{
    if (s->tls != NULL) {
        zkc_wipe_free(s->tls, strlen(s->tls));
        s->tls = NULL;
    }
    if (t == NULL)
        return 0;
    if (check_names(t, s->err, sizeof s->err) != 0)
        return -1;
    s->tls = t->key_password != NULL ? xprintf("%s,%s,%s,%s", t->ca, t->cert, t->key, t->key_password)
                                     : xprintf("%s,%s,%s", t->ca, t->cert, t->key);
    if (s->tls == NULL) {
        snprintf(s->err, sizeof s->err, "out of memory");
        return -1;
    }
    return 0;
}

zhandle_t *zkc_init_handle(zkclient *s, watcher_fn w, log_callback_fn log)
{
    if (s->tls == NULL)
        return zookeeper_init2(s->hosts, w, s->timeout_ms, NULL, s, ZOO_NO_LOG_CLIENTENV, log);
    return zookeeper_init_ssl2(s->hosts, s->tls, w, s->timeout_ms, NULL, s, ZOO_NO_LOG_CLIENTENV,
                               log);
}

#endif
