/*
 * xml.c - S3 XML writer and expat-based request-body reader (see xml.h).
 */
#include "s3/xml.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <expat.h>

/* ---- writer ------------------------------------------------------------ */

void ol_xml_w_init(struct ol_xml_w *w, char *buf, size_t cap)
{
    w->p = buf;
    w->n = 0;
    w->cap = cap;
    w->err = 0;
}

static void put(struct ol_xml_w *w, const char *s, size_t n)
{
    if (w->err)
        return;
    if (n > w->cap - w->n) {
        w->err = -ENOSPC;
        return;
    }
    memcpy(w->p + w->n, s, n);
    w->n += n;
}

static void puts_(struct ol_xml_w *w, const char *s) { put(w, s, strlen(s)); }

void ol_xml_decl(struct ol_xml_w *w)
{
    puts_(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
}

void ol_xml_open(struct ol_xml_w *w, const char *tag, const char *ns)
{
    put(w, "<", 1);
    puts_(w, tag);
    if (ns) {
        puts_(w, " xmlns=\"");
        puts_(w, ns);
        put(w, "\"", 1);
    }
    put(w, ">", 1);
}

void ol_xml_close(struct ol_xml_w *w, const char *tag)
{
    put(w, "</", 2);
    puts_(w, tag);
    put(w, ">", 1);
}

void ol_xml_text(struct ol_xml_w *w, const char *t, size_t len)
{
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        const char *rep = NULL;
        char num[8];
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (c < 0x20 || c == 0x7f) {   /* incl. \t \n \r: keep them exact */
                snprintf(num, sizeof num, "&#x%X;", c);
                rep = num;
            }
        }
        if (!rep)
            continue;
        put(w, t + run, i - run);
        puts_(w, rep);
        run = i + 1;
    }
    put(w, t + run, len - run);
}

void ol_xml_elem(struct ol_xml_w *w, const char *tag, const char *text, size_t len)
{
    ol_xml_open(w, tag, NULL);
    ol_xml_text(w, text, len);
    ol_xml_close(w, tag);
}

void ol_xml_elem_s(struct ol_xml_w *w, const char *tag, const char *text)
{
    ol_xml_elem(w, tag, text, strlen(text));
}

void ol_xml_elem_u64(struct ol_xml_w *w, const char *tag, unsigned long long v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%llu", v);
    ol_xml_elem(w, tag, b, (size_t)n);
}

int ol_xml_error_doc(char *buf, size_t cap, const char *code, const char *message,
                     const char *resource, size_t resource_len, const char *request_id)
{
    struct ol_xml_w w;
    ol_xml_w_init(&w, buf, cap);
    ol_xml_decl(&w);
    ol_xml_open(&w, "Error", NULL);
    ol_xml_elem_s(&w, "Code", code);
    ol_xml_elem_s(&w, "Message", message);
    if (resource)
        ol_xml_elem(&w, "Resource", resource, resource_len);
    ol_xml_elem_s(&w, "RequestId", request_id);
    ol_xml_close(&w, "Error");
    return w.err ? w.err : (int)w.n;
}

/* ---- reader ------------------------------------------------------------ */

struct rd {
    XML_Parser p;
    ol_xml_cb cb;
    void *ctx;
    int err;
    size_t depth, elems;
    size_t path_len[OL_XML_MAX_DEPTH + 1];   /* path length at each depth */
    char path[OL_XML_MAX_PATH + 1];
    bool had_child[OL_XML_MAX_DEPTH + 1];
    size_t text_len;
    char text[OL_XML_MAX_TEXT + 1];
};

static void stop(struct rd *r, int err)
{
    if (!r->err)
        r->err = err;
    XML_StopParser(r->p, XML_FALSE);
}

/* Element names without a namespace prefix: S3 bodies carry the default
 * namespace (xmlns="http://s3.amazonaws.com/doc/2006-03-01/") or none. */
static void on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct rd *r = ud;
    if (r->err)
        return;
    if (r->depth == OL_XML_MAX_DEPTH || ++r->elems > OL_XML_MAX_ELEMS) {
        stop(r, -E2BIG);
        return;
    }
    const char *local = strrchr(name, '|');   /* namespace separator (see below) */
    local = local ? local + 1 : name;
    size_t nl = strlen(local), at = r->path_len[r->depth];
    if (r->depth > 0 && r->text_len) {         /* text before a child element */
        for (size_t i = 0; i < r->text_len; i++)
            if (r->text[i] != ' ' && r->text[i] != '\t' && r->text[i] != '\n' &&
                r->text[i] != '\r') {
                stop(r, -EBADMSG);
                return;
            }
    }
    if (r->depth > 0)
        r->had_child[r->depth] = true;
    if (at + (r->depth ? 1 : 0) + nl > OL_XML_MAX_PATH) {
        stop(r, -E2BIG);
        return;
    }
    if (r->depth)
        r->path[at++] = '/';
    memcpy(r->path + at, local, nl);
    r->path[at + nl] = 0;
    r->depth++;
    r->path_len[r->depth] = at + nl;
    r->had_child[r->depth] = false;
    r->text_len = 0;
    int rc = r->cb(r->ctx, r->path, r->depth, NULL, 0, false);
    if (rc < 0)
        stop(r, rc);
}

static void on_end(void *ud, const XML_Char *name)
{
    struct rd *r = ud;
    if (r->err)
        return;
    const char *text = r->had_child[r->depth] ? "" : r->text;
    size_t len = r->had_child[r->depth] ? 0 : r->text_len;
    r->text[r->text_len] = 0;
    int rc = r->cb(r->ctx, r->path, r->depth, text, len, true);
    if (rc < 0) {
        stop(r, rc);
        return;
    }
    r->depth--;
    r->path[r->path_len[r->depth]] = 0;
    r->text_len = 0;
}

static void on_text(void *ud, const XML_Char *s, int len)
{
    struct rd *r = ud;
    if (r->err || r->depth == 0)
        return;
    if (r->had_child[r->depth]) {   /* text after a child: whitespace only */
        for (int i = 0; i < len; i++)
            if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
                stop(r, -EBADMSG);
                return;
            }
        return;
    }
    if ((size_t)len > OL_XML_MAX_TEXT - r->text_len) {
        stop(r, -E2BIG);
        return;
    }
    memcpy(r->text + r->text_len, s, (size_t)len);
    r->text_len += (size_t)len;
}

static void on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                       const XML_Char *pubid, int has_internal)
{
    stop(ud, -EBADMSG);   /* no DTDs: no entities, no external references */
}

int ol_xml_parse(const char *body, size_t len, ol_xml_cb cb, void *ctx)
{
    struct rd local;   /* ~4.5 KiB on the caller's stack */
    struct rd *rp = &local;
    memset(rp, 0, offsetof(struct rd, text));
    rp->cb = cb;
    rp->ctx = ctx;
    rp->p = XML_ParserCreateNS("UTF-8", '|');
    if (!rp->p)
        return -ENOMEM;
    XML_SetUserData(rp->p, rp);
    XML_SetElementHandler(rp->p, on_start, on_end);
    XML_SetCharacterDataHandler(rp->p, on_text);
    XML_SetStartDoctypeDeclHandler(rp->p, on_doctype);
    XML_SetParamEntityParsing(rp->p, XML_PARAM_ENTITY_PARSING_NEVER);
    int ok = len <= (size_t)0x7fffffff &&
             XML_Parse(rp->p, body, (int)len, XML_TRUE) == XML_STATUS_OK;
    int err = rp->err;
    XML_ParserFree(rp->p);
    if (err)
        return err;
    return ok ? 0 : -EBADMSG;
}
