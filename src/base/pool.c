/*
 * pool.c - see pool.h.
 */
#include "base/pool.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

int ol_pool_init(struct ol_pool *p, size_t obj_size, uint32_t count)
{
    memset(p, 0, sizeof *p);
    if (obj_size < sizeof(void *) || count == 0)
        return -EINVAL;
    obj_size = (obj_size + 15) & ~(size_t)15;
    void *m = mmap(NULL, obj_size * count, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -ENOMEM;
    p->mem = m;
    p->obj_size = obj_size;
    p->count = count;
    return 0;
}

void ol_pool_exit(struct ol_pool *p)
{
    if (p->mem)
        munmap(p->mem, p->obj_size * p->count);
    memset(p, 0, sizeof *p);
}
