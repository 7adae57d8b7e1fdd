/*
 * ops.c - the S3 operations: dispatch of a routed, authenticated request.
 *
 * Operations whose storage is not built yet answer NotImplemented (501),
 * naming the operation, so a client sees exactly what is missing.
 */
#include "s3/s3_int.h"

#include <stdio.h>

void ol_s3_dispatch(struct ol_s3_req *q)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s is not implemented by this build of openlaked yet.",
             ol_s3_op_name(q->route.op));
    ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, msg);
}
