/* MaxPool and its gradient: the reference loops of poet/maxpool_ref.h. */
#include "poet/maxpool_ref.h"

void poet_maxpool2d_f32(const float *X, float *Y, const int32_t *g) { poet_maxpool2d_ref(X, Y, g); }

void poet_maxpool2d_grad_f32(const float *X, const float *dY, float *dX, const int32_t *g, int32_t r0,
                             int32_t r1)
{
    poet_maxpool2d_grad_ref(X, dY, dX, g, r0, r1);
}
