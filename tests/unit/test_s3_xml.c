/*
 * test_s3_xml.c - S3 XML: the error document, escaping, and request bodies
 * read as paths (DeleteObjects, CompleteMultipartUpload), with the hostile
 * cases: DOCTYPE / entities, depth, text and count limits, mixed content,
 * malformed XML.
 */
#include "olt.h"

#include "s3/xml.h"

#include <errno.h>
#include <stdlib.h>

OLT_TEST(s3_xml_error_document)
{
    char b[512];
    int n = ol_xml_error_doc(b, sizeof b, "NoSuchKey", "The specified key does not exist.",
                             "/bkt/a<b>&\"c'", 13, "17B2A3C4D5E6F701");
    OLT_CHECK(n > 0);
    b[n] = 0;
    OLT_CHECK_STR(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
                     "<Message>The specified key does not exist.</Message>"
                     "<Resource>/bkt/a&lt;b&gt;&amp;&quot;c&apos;</Resource>"
                     "<RequestId>17B2A3C4D5E6F701</RequestId></Error>");
    OLT_CHECK_EQ(ol_xml_error_doc(b, 40, "NoSuchKey", "m", "r", 1, "id"), -ENOSPC);
    struct ol_xml_w w;
    ol_xml_w_init(&w, b, sizeof b);
    ol_xml_elem(&w, "Key", "a\tb\x01\n", 5);
    OLT_CHECK_EQ(w.err, 0);
    b[w.n] = 0;
    OLT_CHECK_STR(b, "<Key>a&#x9;b&#x1;&#xA;</Key>");
}

struct rec {
    char log[4096];
    size_t n;
    int fail_at;   /* return -EPERM on this event (1-based), 0: never */
    int events;
};

static int cb(void *ctx, const char *path, size_t depth, const char *text, size_t len, bool end)
{
    struct rec *r = ctx;
    if (++r->events == r->fail_at)
        return -EPERM;
    int k = end ? snprintf(r->log + r->n, sizeof r->log - r->n, "%s=%.*s;", path, (int)len, text)
                : snprintf(r->log + r->n, sizeof r->log - r->n, "+%s;", path);
    r->n += (size_t)k;
    if (r->n >= sizeof r->log)   /* long texts: keep the first part only */
        r->n = sizeof r->log - 1;
    (void)depth;
    return 0;
}

static int parse(const char *doc, struct rec *r)
{
    memset(r, 0, sizeof *r);
    return ol_xml_parse(doc, strlen(doc), cb, r);
}

OLT_TEST(s3_xml_reads_request_bodies)
{
    struct rec r;
    const char *del =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
        "  <Quiet>true</Quiet>\n"
        "  <Object><Key>a&amp;b &lt;c&gt;</Key></Object>\n"
        "  <Object><Key>\xe2\x82\xac/x</Key><VersionId>v1</VersionId></Object>\n"
        "</Delete>";
    OLT_CHECK_EQ(parse(del, &r), 0);
    OLT_CHECK_STR(r.log, "+Delete;+Delete/Quiet;Delete/Quiet=true;+Delete/Object;"
                         "+Delete/Object/Key;Delete/Object/Key=a&b <c>;Delete/Object=;"
                         "+Delete/Object;+Delete/Object/Key;Delete/Object/Key=\xe2\x82\xac/x;"
                         "+Delete/Object/VersionId;Delete/Object/VersionId=v1;Delete/Object=;"
                         "Delete=;");
    /* no namespace works the same; CDATA and character references decode */
    OLT_CHECK_EQ(parse("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                       "<ETag><![CDATA[\"x\"]]>&#65;</ETag></Part></CompleteMultipartUpload>", &r), 0);
    OLT_CHECK(strstr(r.log, "CompleteMultipartUpload/Part/ETag=\"x\"A;") != NULL);
    /* the callback's error stops the parse */
    memset(&r, 0, sizeof r);
    r.fail_at = 3;
    OLT_CHECK_EQ(ol_xml_parse(del, strlen(del), cb, &r), -EPERM);
}

OLT_TEST(s3_xml_refuses_hostile_bodies)
{
    struct rec r;
    /* entity expansion and external entities need a DOCTYPE: refused */
    OLT_CHECK_EQ(parse("<!DOCTYPE a [<!ENTITY x \"xxxxxxxx\"><!ENTITY y \"&x;&x;&x;&x;\">]>"
                       "<a>&y;</a>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<!DOCTYPE a SYSTEM \"file:///etc/passwd\"><a>x</a>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<a>&undefined;</a>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<a><b></a>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<a>x</a><b/>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<a>text<b>1</b></a>", &r), -EBADMSG);   /* mixed content */
    OLT_CHECK_EQ(parse("<a><b>1</b>text</a>", &r), -EBADMSG);
    OLT_CHECK_EQ(parse("<a>\xff</a>", &r), -EBADMSG);             /* not UTF-8 */
    OLT_CHECK_EQ(parse("<a><b><c><d><e><f><g><h>1</h></g></f></e></d></c></b></a>", &r), 0);
    OLT_CHECK_EQ(parse("<a><b><c><d><e><f><g><h><i>1</i></h></g></f></e></d></c></b></a>", &r),
                 -E2BIG);
    static char big[OL_XML_MAX_TEXT + 64];
    strcpy(big, "<a>");
    memset(big + 3, 'x', OL_XML_MAX_TEXT + 1);
    strcpy(big + 3 + OL_XML_MAX_TEXT + 1, "</a>");
    OLT_CHECK_EQ(parse(big, &r), -E2BIG);
    big[3 + OL_XML_MAX_TEXT] = 0;
    strcat(big, "</a>");
    memset(&r, 0, sizeof r);
    OLT_CHECK_EQ(ol_xml_parse(big, strlen(big), cb, &r), 0);
    /* too many elements */
    size_t cap = 8 + 4 * (OL_XML_MAX_ELEMS + 1) + 8;
    char *many = malloc(cap);
    strcpy(many, "<a>");
    size_t n = 3;
    for (unsigned i = 0; i < OL_XML_MAX_ELEMS; i++) {
        memcpy(many + n, "<b/>", 4);
        n += 4;
    }
    strcpy(many + n, "</a>");
    OLT_CHECK_EQ(ol_xml_parse(many, strlen(many), cb, &(struct rec){0}), -E2BIG);
    free(many);
}
