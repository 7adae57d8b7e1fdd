/*
 * xml.h - the XML of the S3 API: writing response documents (escaped,
 * bounded) and reading request bodies (expat).
 *
 * Owns: a bounded writer (elements, escaped text, the error document S3
 * clients parse: Code, Message, Resource, RequestId) and a reader that
 * turns a request body into leaf events ("Delete/Object/Key" = "a.txt") and
 * record boundaries ("Delete/Object" ended), with the hostile-input rules:
 * no DOCTYPE (so no entity expansion, internal or external), a depth limit,
 * a text limit per element, and a count limit per document.
 *
 * Must not: know which S3 operation a body belongs to; handlers in src/s3
 * map paths to fields. The writer never allocates; the reader allocates
 * only inside expat (bounded by the body size limit the caller enforces).
 */
#ifndef OL_S3_XML_H
#define OL_S3_XML_H

#include <stdbool.h>
#include <stddef.h>

#define OL_XML_MAX_DEPTH   8u       /* element nesting in a request body */
#define OL_XML_MAX_TEXT    4096u    /* bytes of text in one element */
#define OL_XML_MAX_PATH    256u     /* "A/B/C" of the elements open */
#define OL_XML_MAX_ELEMS   50000u   /* elements in one document */

/* ---- writer ------------------------------------------------------------ */

struct ol_xml_w {
    char *p;
    size_t n, cap;
    int err;          /* -ENOSPC once anything did not fit */
};

void ol_xml_w_init(struct ol_xml_w *w, char *buf, size_t cap);
/* `<?xml version="1.0" encoding="UTF-8"?>` */
void ol_xml_decl(struct ol_xml_w *w);
/* <tag> / <tag xmlns="..."> when ns is not NULL */
void ol_xml_open(struct ol_xml_w *w, const char *tag, const char *ns);
void ol_xml_close(struct ol_xml_w *w, const char *tag);
/* <tag>escaped text</tag> */
void ol_xml_elem(struct ol_xml_w *w, const char *tag, const char *text, size_t len);
void ol_xml_elem_s(struct ol_xml_w *w, const char *tag, const char *text);
void ol_xml_elem_u64(struct ol_xml_w *w, const char *tag, unsigned long long v);
/* Escaped text alone (&amp; &lt; &gt; &quot; &apos;, and control
 * characters that XML 1.0 cannot carry written as &#xN; references). */
void ol_xml_text(struct ol_xml_w *w, const char *text, size_t len);

/*
 * ol_xml_error_doc - the S3 error document:
 *   <?xml ...?><Error><Code>..</Code><Message>..</Message>
 *   <Resource>..</Resource><RequestId>..</RequestId></Error>
 * into buf[cap]. Returns its length, or -ENOSPC.
 */
int ol_xml_error_doc(char *buf, size_t cap, const char *code, const char *message,
                     const char *resource, size_t resource_len, const char *request_id);

/* ---- reader ------------------------------------------------------------ */

/*
 * Called for every element: at its start with text NULL (so a handler can
 * begin a record, e.g. "Delete/Object"), and at its end with its text
 * (text of leaf elements; "" for elements that only hold others). path is
 * the '/'-joined names from the root, NUL-terminated. Return 0 to go on,
 * or a negative errno to stop the parse with that value.
 */
typedef int (*ol_xml_cb)(void *ctx, const char *path, size_t depth, const char *text,
                         size_t len, bool end);

/*
 * ol_xml_parse - parse a whole request body. Returns 0, the callback's
 * error, -EBADMSG (not well-formed XML, a DOCTYPE, mixed text around child
 * elements), or -E2BIG (a limit above).
 */
int ol_xml_parse(const char *body, size_t len, ol_xml_cb cb, void *ctx);

#endif
