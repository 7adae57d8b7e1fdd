/*
 * md5_steps.h - RFC 1321's 64 steps, written once for every MD5 kernel
 * (internal to src/base: md5.c's lanes, md5sha.c's pass beside SHA-256).
 *
 * The includer defines STEP(f, a, b, c, d, j, s, t) — one step: a += f(b,
 * c, d) + m[j] + t; a = a <<< s; a += b — on whatever its state is
 * (scalar lanes, vectors). MD5_Q0 .. MD5_Q15 are the steps four at a time,
 * in order, for a kernel that puts other work between them; MD5_STEPS is
 * all of them.
 */
#ifndef OL_BASE_MD5_STEPS_H
#define OL_BASE_MD5_STEPS_H

#define ROTL(x, c) (((x) << (c)) | ((x) >> (32 - (c))))
#define MF(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MG(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MH(x, y, z) ((x) ^ (y) ^ (z))
#define MI(x, y, z) ((y) ^ ((x) | ~(z)))

#define MD5_Q0 \
    STEP(MF, a, b, c, d, 0, 7, 0xd76aa478) \
    STEP(MF, d, a, b, c, 1, 12, 0xe8c7b756) \
    STEP(MF, c, d, a, b, 2, 17, 0x242070db) \
    STEP(MF, b, c, d, a, 3, 22, 0xc1bdceee)
#define MD5_Q1 \
    STEP(MF, a, b, c, d, 4, 7, 0xf57c0faf) \
    STEP(MF, d, a, b, c, 5, 12, 0x4787c62a) \
    STEP(MF, c, d, a, b, 6, 17, 0xa8304613) \
    STEP(MF, b, c, d, a, 7, 22, 0xfd469501)
#define MD5_Q2 \
    STEP(MF, a, b, c, d, 8, 7, 0x698098d8) \
    STEP(MF, d, a, b, c, 9, 12, 0x8b44f7af) \
    STEP(MF, c, d, a, b, 10, 17, 0xffff5bb1) \
    STEP(MF, b, c, d, a, 11, 22, 0x895cd7be)
#define MD5_Q3 \
    STEP(MF, a, b, c, d, 12, 7, 0x6b901122) \
    STEP(MF, d, a, b, c, 13, 12, 0xfd987193) \
    STEP(MF, c, d, a, b, 14, 17, 0xa679438e) \
    STEP(MF, b, c, d, a, 15, 22, 0x49b40821)
#define MD5_Q4 \
    STEP(MG, a, b, c, d, 1, 5, 0xf61e2562) \
    STEP(MG, d, a, b, c, 6, 9, 0xc040b340) \
    STEP(MG, c, d, a, b, 11, 14, 0x265e5a51) \
    STEP(MG, b, c, d, a, 0, 20, 0xe9b6c7aa)
#define MD5_Q5 \
    STEP(MG, a, b, c, d, 5, 5, 0xd62f105d) \
    STEP(MG, d, a, b, c, 10, 9, 0x02441453) \
    STEP(MG, c, d, a, b, 15, 14, 0xd8a1e681) \
    STEP(MG, b, c, d, a, 4, 20, 0xe7d3fbc8)
#define MD5_Q6 \
    STEP(MG, a, b, c, d, 9, 5, 0x21e1cde6) \
    STEP(MG, d, a, b, c, 14, 9, 0xc33707d6) \
    STEP(MG, c, d, a, b, 3, 14, 0xf4d50d87) \
    STEP(MG, b, c, d, a, 8, 20, 0x455a14ed)
#define MD5_Q7 \
    STEP(MG, a, b, c, d, 13, 5, 0xa9e3e905) \
    STEP(MG, d, a, b, c, 2, 9, 0xfcefa3f8) \
    STEP(MG, c, d, a, b, 7, 14, 0x676f02d9) \
    STEP(MG, b, c, d, a, 12, 20, 0x8d2a4c8a)
#define MD5_Q8 \
    STEP(MH, a, b, c, d, 5, 4, 0xfffa3942) \
    STEP(MH, d, a, b, c, 8, 11, 0x8771f681) \
    STEP(MH, c, d, a, b, 11, 16, 0x6d9d6122) \
    STEP(MH, b, c, d, a, 14, 23, 0xfde5380c)
#define MD5_Q9 \
    STEP(MH, a, b, c, d, 1, 4, 0xa4beea44) \
    STEP(MH, d, a, b, c, 4, 11, 0x4bdecfa9) \
    STEP(MH, c, d, a, b, 7, 16, 0xf6bb4b60) \
    STEP(MH, b, c, d, a, 10, 23, 0xbebfbc70)
#define MD5_Q10 \
    STEP(MH, a, b, c, d, 13, 4, 0x289b7ec6) \
    STEP(MH, d, a, b, c, 0, 11, 0xeaa127fa) \
    STEP(MH, c, d, a, b, 3, 16, 0xd4ef3085) \
    STEP(MH, b, c, d, a, 6, 23, 0x04881d05)
#define MD5_Q11 \
    STEP(MH, a, b, c, d, 9, 4, 0xd9d4d039) \
    STEP(MH, d, a, b, c, 12, 11, 0xe6db99e5) \
    STEP(MH, c, d, a, b, 15, 16, 0x1fa27cf8) \
    STEP(MH, b, c, d, a, 2, 23, 0xc4ac5665)
#define MD5_Q12 \
    STEP(MI, a, b, c, d, 0, 6, 0xf4292244) \
    STEP(MI, d, a, b, c, 7, 10, 0x432aff97) \
    STEP(MI, c, d, a, b, 14, 15, 0xab9423a7) \
    STEP(MI, b, c, d, a, 5, 21, 0xfc93a039)
#define MD5_Q13 \
    STEP(MI, a, b, c, d, 12, 6, 0x655b59c3) \
    STEP(MI, d, a, b, c, 3, 10, 0x8f0ccc92) \
    STEP(MI, c, d, a, b, 10, 15, 0xffeff47d) \
    STEP(MI, b, c, d, a, 1, 21, 0x85845dd1)
#define MD5_Q14 \
    STEP(MI, a, b, c, d, 8, 6, 0x6fa87e4f) \
    STEP(MI, d, a, b, c, 15, 10, 0xfe2ce6e0) \
    STEP(MI, c, d, a, b, 6, 15, 0xa3014314) \
    STEP(MI, b, c, d, a, 13, 21, 0x4e0811a1)
#define MD5_Q15 \
    STEP(MI, a, b, c, d, 4, 6, 0xf7537e82) \
    STEP(MI, d, a, b, c, 11, 10, 0xbd3af235) \
    STEP(MI, c, d, a, b, 2, 15, 0x2ad7d2bb) \
    STEP(MI, b, c, d, a, 9, 21, 0xeb86d391)
/* STEP on vectors of lanes, for a kernel that defines VADD, VSET1, VROL
 * and V_MF .. V_MI (the four functions) on its vector type; m[j] holds
 * word j of every lane's block. */
#define MD5_VSTEP(f, a, b, c, d, j, s, t)              \
    a = VADD(a, VADD(m[j], VSET1((int)(t))));          \
    a = VADD(a, V_##f(b, c, d));                       \
    a = VROL(a, s);                                    \
    a = VADD(a, b);

#define MD5_STEPS \
    MD5_Q0 MD5_Q1 MD5_Q2 MD5_Q3 \
    MD5_Q4 MD5_Q5 MD5_Q6 MD5_Q7 \
    MD5_Q8 MD5_Q9 MD5_Q10 MD5_Q11 \
    MD5_Q12 MD5_Q13 MD5_Q14 MD5_Q15

#endif
