/*
 * container.h - OL_CONTAINER: the struct that holds a member, from a
 * pointer to that member (the callbacks of ops, timers and messages get
 * the member embedded in their owner).
 *
 * Must not: include anything but <stddef.h>.
 */
#ifndef OL_BASE_CONTAINER_H
#define OL_BASE_CONTAINER_H

#include <stddef.h>

#define OL_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#endif
