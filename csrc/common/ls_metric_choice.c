/* ls_metric_choice: see ls_metric_choice.h. */
#include "ls_metric_choice.h"

#include <string.h>

int ls_metric_choose(const unsigned char *known, size_t n, ls_metric_fits fits, void *ctx,
                     unsigned char *keep)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        keep[i] = known[i] ? 1 : 0;
        count += keep[i];
    }
    if (count == 0)
        return 0;
    int all = fits(keep, n, ctx);
    if (all != 0)
        return all == 1 ? (int)count : -1;
    memset(keep, 0, n);
    count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!known[i])
            continue;
        keep[i] = 1;
        int one = fits(keep, n, ctx);
        if (one < 0) {
            keep[i] = 0;
            return -1;
        }
        keep[i] = (unsigned char)one;
        count += (size_t)one;
    }
    return (int)count;
}
