#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/* Swift cannot call C variadic functions (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt); these
   non-variadic wrappers take one argument type each. Debian package: libcurl4-openssl-dev. */

static const long payrecon_curl_global_all = CURL_GLOBAL_ALL;

static inline CURLcode payrecon_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode payrecon_curl_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/** Strings, slists, buffers and callback user data. */
static inline CURLcode payrecon_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

/** CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (same signature). */
static inline CURLcode payrecon_curl_easy_setopt_write(CURL *handle, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode payrecon_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode payrecon_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}
