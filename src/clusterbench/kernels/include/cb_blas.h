/* What a kernel that dlopen()s a BLAS really loaded (dgemm.c, hpl.c). Needs cb_common.h. */
#ifndef CB_BLAS_H
#define CB_BLAS_H
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How the BLAS loaded as handle h says it is configured: config gets "OpenBLAS <config>",
 * "BLIS <version>", MKL's version string or ""; returns its thread count (-1: it does not say).
 * real (PATH_MAX) gets lib's real path, or lib itself. */
static inline int cb_blas_describe(void *h, const char *lib, char *config, size_t len, char *real) {
    typedef char *(*str_fn)(void);
    typedef int (*int_fn)(void);
    typedef void (*mkl_ver_fn)(char *, int);
    str_fn ob_cfg = (str_fn)dlsym(h, "openblas_get_config");
    str_fn bli_ver = (str_fn)dlsym(h, "bli_info_get_version_str");
    int_fn ob_thr = (int_fn)dlsym(h, "openblas_get_num_threads");
    int_fn bli_thr = (int_fn)dlsym(h, "bli_thread_get_num_threads");
    mkl_ver_fn mkl_ver = (mkl_ver_fn)dlsym(h, "MKL_Get_Version_String");
    config[0] = 0;
    if (ob_cfg) snprintf(config, len, "OpenBLAS %s", ob_cfg());
    else if (bli_ver) snprintf(config, len, "BLIS %s", bli_ver());
    else if (mkl_ver) mkl_ver(config, (int)len);
    if (!realpath(lib, real)) snprintf(real, PATH_MAX, "%s", lib);
    return ob_thr ? ob_thr() : bli_thr ? bli_thr() : -1;
}

/* BLAS-like shared objects mapped into this process (what was really loaded). */
static inline void cb_json_loaded_libs(const char *key) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], seen[16][1024];
    int nseen = 0;
    cb_json_key(key);
    putchar('[');
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *p = strchr(line, '/');
            if (!p) continue;
            p[strcspn(p, "\n")] = 0;
            const char *base = strrchr(p, '/') + 1;
            if (!(strstr(base, "blas") || strstr(base, "blis") || strstr(base, "mkl") || strstr(base, "armpl") ||
                  strstr(base, "atlas") || strstr(base, "essl") || strstr(base, "lapack")))
                continue;
            int dup = 0;
            for (int i = 0; i < nseen; i++) dup |= !strcmp(seen[i], p);
            if (dup || nseen == 16) continue;
            snprintf(seen[nseen], sizeof seen[0], "%s", p);
            if (nseen++) putchar(',');
            cb_json_escape(p);
        }
        fclose(f);
    }
    putchar(']');
}
#endif /* CB_BLAS_H */
