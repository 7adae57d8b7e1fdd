/*
 * test_s3_creds.c - S3 credentials: configured pairs win; otherwise one pair
 * is generated on the first start (0600, atomic) and read back afterwards;
 * a loose or malformed file is refused with a message saying what to do.
 */
#include "olt.h"

#include "s3/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

OLT_TEST(s3_creds_generated_once_then_kept)
{
    static struct ol_config cfg;
    static struct ol_s3_credset a, b;
    char err[256] = "";
    const char *dir = olt_tmpdir();
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &a, err, sizeof err), 0);
    OLT_CHECK(a.generated);
    OLT_CHECK_EQ(a.n, 1);
    OLT_CHECK_EQ(strlen(a.access_key[0]), 20);
    OLT_CHECK_EQ(strlen(a.secret[0]), 40);
    struct stat st;
    OLT_CHECK_EQ(stat(a.path, &st), 0);
    OLT_CHECK_EQ(st.st_mode & 0777, 0600);
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &b, err, sizeof err), 0);
    OLT_CHECK(!b.generated);
    OLT_CHECK_STR(b.access_key[0], a.access_key[0]);
    OLT_CHECK_STR(b.secret[0], a.secret[0]);
    OLT_CHECK_EQ(b.view.n, 1);
    OLT_CHECK_STR(b.view.secrets[0], a.secret[0]);
    /* another directory, another pair */
    char dir2[512];
    snprintf(dir2, sizeof dir2, "%s/other", dir);
    mkdir(dir2, 0700);
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir2, &b, err, sizeof err), 0);
    OLT_CHECK(strcmp(b.secret[0], a.secret[0]) != 0);
}

OLT_TEST(s3_creds_configured_and_refused)
{
    static struct ol_config cfg;
    static struct ol_s3_credset s;
    char err[256] = "";
    const char *dir = olt_tmpdir();
    cfg.n_credentials = 2;
    strcpy(cfg.credentials[0].access_key, "AK1");
    strcpy(cfg.credentials[0].secret_key, "SK1");
    strcpy(cfg.credentials[1].access_key, "AK2");
    strcpy(cfg.credentials[1].secret_key, "SK2");
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &s, err, sizeof err), 0);
    OLT_CHECK_EQ(s.view.n, 2);
    OLT_CHECK_STR(s.view.access_keys[1], "AK2");
    OLT_CHECK(!s.generated);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, OL_S3_CREDS_FILE);
    OLT_CHECK(access(path, F_OK) != 0);   /* nothing generated */
    cfg.n_credentials = 0;
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    OLT_CHECK(write(fd, "access_key = \"A\"\nsecret_key = \"B\"\n", 34) == 34);
    close(fd);
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &s, err, sizeof err), -EACCES);
    OLT_CHECK(strstr(err, "0600") != NULL);
    chmod(path, 0600);
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &s, err, sizeof err), 0);
    OLT_CHECK_STR(s.view.access_keys[0], "A");
    fd = open(path, O_WRONLY | O_TRUNC);
    OLT_CHECK(write(fd, "access_key = A\n", 15) == 15);
    close(fd);
    err[0] = 0;
    OLT_CHECK_EQ(ol_s3_creds_load(&cfg, dir, &s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "delete the file") != NULL);
}
