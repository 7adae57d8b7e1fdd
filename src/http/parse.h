/*
 * parse.h - HTTP/1.1 request-head parser, head analysis and chunked decoder.
 *
 * Owns: the wire grammar of RFC 9112 requests as OpenLake accepts it (request
 * line, header block, chunked transfer coding) and the framing rules that
 * keep request smuggling out (RFC 9112 section 6). docs/http.md is the prose
 * version of this contract.
 *
 * Must not: allocate, copy request bytes (except chunked trailers, which are
 * small and bounded), keep hidden state between calls, read one byte past
 * the length it is given, or include anything but libc. It knows nothing of
 * sockets, buffers or the daemon: callers hand it bytes and get slices of
 * those same bytes back.
 *
 * Return convention of the byte parsers (picohttpparser style):
 *   > 0   complete; the number of bytes consumed
 *   -2    OL_HTTP_INCOMPLETE: a valid prefix; call again with more bytes
 *   -1    OL_HTTP_INVALID: malformed; answer 400 and close
 *   -3    OL_HTTP_TOO_MANY_HEADERS: more header lines than the caller's
 *         array holds; answer 431 and close
 * Line endings: CRLF, or a bare LF (RFC 9112 section 2.2 MAY). A CR not
 * followed by LF is always invalid. The chunked decoder is stricter: it
 * requires CRLF everywhere in the body framing.
 */
#ifndef OL_HTTP_PARSE_H
#define OL_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OL_HTTP_INVALID           (-1)
#define OL_HTTP_INCOMPLETE        (-2)
#define OL_HTTP_TOO_MANY_HEADERS  (-3)

/* One header line. Both slices point into the caller's buffer and are not
 * NUL-terminated. The value has leading and trailing SP/HTAB removed and may
 * be empty (value_len 0, value pointing at where it would start). */
struct ol_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* A parsed request head. Filled by ol_http_parse_request on success only;
 * every slice points into the buffer that was parsed, so it stays valid for
 * as long as the caller keeps those bytes where they are. */
struct ol_http_request {
    const char *method;          /* a tchar token, e.g. "GET" */
    size_t method_len;
    const char *target;          /* request-target as sent (path + query) */
    size_t target_len;
    int minor_version;           /* 0 (HTTP/1.0) or 1 (HTTP/1.1) */
    struct ol_http_header *headers; /* the caller's array, in wire order */
    size_t num_headers;
};

/*
 * ol_http_parse_request - parse one request head from the start of buf.
 *
 * buf/len:     the bytes received so far. Only buf[0..len) is ever read.
 * last_len:    0, or the len of the previous call on this same buffer that
 *              returned OL_HTTP_INCOMPLETE. When given (and < len), the
 *              parser first looks for the end of the head in the new bytes
 *              only and returns -2 at once if it is not there; errors in the
 *              new bytes are then reported once the head is complete.
 * req:         OUT: filled on success; unspecified on any other return.
 * headers:     caller's array of max_headers entries; req->headers points at
 *              it and req->num_headers says how many were filled.
 *
 * Empty lines before the request line are skipped (RFC 9112 section 2.2)
 * and counted in the bytes consumed. The request line must be exactly
 * "method SP request-target SP HTTP/1.0|HTTP/1.1" (single spaces). The
 * target is any run of bytes other than CTLs, SP and DEL. Header names are
 * tchar tokens followed directly by ':' (whitespace before the colon is
 * invalid); values are HTAB, SP, VCHAR and obs-text (0x80-0xFF) only.
 * Continuation lines (obs-fold) are invalid.
 *
 * Returns the length of the head including its final empty line (> 0),
 * OL_HTTP_INCOMPLETE, OL_HTTP_INVALID, or OL_HTTP_TOO_MANY_HEADERS. A len
 * above INT_MAX is treated as INT_MAX; callers bound the head size anyway
 * (when their buffer is full and the answer is still -2, that is a 431).
 */
int ol_http_parse_request(const char *buf, size_t len, size_t last_len,
                          struct ol_http_request *req,
                          struct ol_http_header *headers, size_t max_headers);

/*
 * ol_http_parse_headers - parse a header block alone: zero or more header
 * lines and the empty line that ends them (e.g. chunked trailers, see
 * ol_chunked_trailers). Same grammar, same returns and same last_len hint
 * as ol_http_parse_request; *num_headers (OUT) is set on success only.
 */
int ol_http_parse_headers(const char *buf, size_t len, size_t last_len,
                          struct ol_http_header *headers, size_t max_headers,
                          size_t *num_headers);

/*
 * ol_http_name_eq - true when the n bytes at s equal the NUL-terminated
 * lit, ignoring ASCII case. lit must be lower case (e.g. "content-type").
 */
bool ol_http_name_eq(const char *s, size_t n, const char *lit);

/*
 * ol_http_header_find - first header of req whose name matches name
 * (lower case, NUL-terminated) ignoring ASCII case, or NULL. The result
 * points into req->headers.
 */
const struct ol_http_header *ol_http_header_find(const struct ol_http_request *req,
                                                 const char *name);

/* ol_http_head_info.content_length when the request has no Content-Length. */
#define OL_HTTP_NO_LENGTH UINT64_MAX

/* What a request head means for framing and the connection. */
struct ol_http_head_info {
    uint64_t content_length;  /* <= INT64_MAX, or OL_HTTP_NO_LENGTH */
    bool chunked;             /* Transfer-Encoding: chunked */
    bool keep_alive;          /* connection may be reused after this request */
    bool expect_continue;     /* HTTP/1.1 "Expect: 100-continue" */
    const char *host;         /* Host value (into the buffer), NULL if absent */
    size_t host_len;
    int status;               /* on error: 400, 417 or 501; 0 on success */
    const char *reason;       /* on error: short static text, else NULL */
};

/*
 * ol_http_head_analyze - apply the HTTP/1.1 framing and connection rules to a
 * parsed head. Reads only req; fills every field of *out.
 *
 * Rejected with status 400: Content-Length and Transfer-Encoding together;
 * more than one Content-Length header (even with equal values); a
 * Content-Length that is not 1*DIGIT or exceeds INT64_MAX; Transfer-Encoding
 * in an HTTP/1.0 request; Transfer-Encoding (all such headers read as one
 * list) whose final coding is not "chunked", that names "chunked" twice, or
 * that is not a list of tokens; HTTP/1.1 without Host; more than one Host;
 * a Host value with characters outside RFC 3986 host[:port].
 * Rejected with status 501: any transfer coding other than chunked before a
 * final chunked (e.g. "gzip, chunked").
 * Rejected with status 417: an Expect element other than "100-continue".
 *
 * keep_alive: HTTP/1.1 unless Connection lists "close"; HTTP/1.0 only when
 * Connection lists "keep-alive" and not "close". Tokens are matched ignoring
 * case across all Connection headers. expect_continue is never set for
 * HTTP/1.0 (RFC 9110 section 10.1.1).
 *
 * Returns 0, or -1 with out->status and out->reason set. Other fields of
 * *out are unspecified after -1; the caller sends the error and closes.
 */
int ol_http_head_analyze(const struct ol_http_request *req,
                         struct ol_http_head_info *out);

/* ---- chunked transfer coding (RFC 9112 section 7.1) ---- */

/* Longest trailer section kept, including the CRLF that ends it. */
#define OL_CHUNKED_TRAILER_MAX 4096
/* Default and largest limit on one chunk-size line (size + extensions). */
#define OL_CHUNKED_LINE_MAX 4096
/* Extra return of ol_chunked_decode: the body exceeds max_body (413). */
#define OL_CHUNKED_TOO_LARGE (-3)

/*
 * Decoder state for one chunked body. Deliberately public so callers can
 * embed it (it holds the trailer buffer); treat the fields as private and
 * use the functions and accessors below.
 */
struct ol_chunked {
    uint64_t remaining;    /* data bytes left in the current chunk */
    uint64_t size;         /* chunk-size being read */
    uint64_t total;        /* data bytes decoded so far */
    uint64_t max_body;     /* 0: no limit */
    uint32_t line_len;     /* bytes of the current chunk-size line */
    uint32_t max_line;
    uint8_t state;
    uint8_t ndigits;
    int8_t error;          /* sticky return once failed, else 0 */
    uint16_t trailer_len;
    char trailer[OL_CHUNKED_TRAILER_MAX];
};

/*
 * ol_chunked_init - reset d for a new body.
 * max_body: largest total of data bytes accepted (0: no limit).
 * max_line: largest chunk-size line in bytes, size digits plus extensions
 *           and not counting CRLF (0 or above OL_CHUNKED_LINE_MAX: use
 *           OL_CHUNKED_LINE_MAX).
 */
void ol_chunked_init(struct ol_chunked *d, uint64_t max_body, uint32_t max_line);

/*
 * ol_chunked_decode - consume chunked framing from buf[0..len) and hand back
 * at most one span of body data.
 *
 * data/data_len: OUT. A span of body bytes that points into buf (zero copy),
 *                or NULL/0 when this call produced none. A span is always
 *                the last thing a call consumes: it ends the call.
 *
 * Returns the bytes of buf consumed (0..len), OL_HTTP_INVALID (-1) on a
 * framing error, or OL_CHUNKED_TOO_LARGE (-3) when a chunk would take the
 * body past max_body. Errors are sticky: later calls return the same value.
 * When len > 0 and the body is not done, at least one byte is consumed.
 * Once the last chunk and the trailer section (through its final CRLF) are
 * consumed, ol_chunked_done(d) is true and the call returns without
 * consuming anything after that CRLF: those bytes belong to the next
 * request. Calls after done return 0.
 *
 * Framing accepted: chunk-size is 1 to 16 hex digits and below 2^63, then
 * optional extensions *(BWS ";" BWS token [BWS "=" BWS (token /
 * quoted-string)]), then CRLF; chunk data is followed by CRLF; trailer
 * lines are valid header lines. Bare LF or CR anywhere is invalid.
 * Extensions are checked and ignored.
 */
ssize_t ol_chunked_decode(struct ol_chunked *d, const char *buf, size_t len,
                          const char **data, size_t *data_len);

/* True once the whole body, trailers included, has been consumed. */
bool ol_chunked_done(const struct ol_chunked *d);

/*
 * ol_chunked_trailers - the trailer section once done: the field lines as
 * received, each ending in CRLF, then the final CRLF ("\r\n" alone when
 * there were none). Already validated; parse it with ol_http_parse_headers
 * (which returns *len). Returns NULL (and *len 0) before done. The bytes
 * live in d and stay valid until d is reset or freed.
 */
const char *ol_chunked_trailers(const struct ol_chunked *d, size_t *len);

/* Body bytes handed back so far. */
static inline uint64_t ol_chunked_total(const struct ol_chunked *d)
{
    return d->total;
}

#endif
