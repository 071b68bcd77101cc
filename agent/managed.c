/* SPDX-License-Identifier: BSD-3-Clause */
#include <math.h>
#include <stdlib.h>

#include "managed.h"

struct ag_managed *
ag_managed_new(void)
{
	struct ag_managed *m = calloc(1, sizeof(*m));

	if (m)
		pthread_mutex_init(&m->lock, NULL);
	return m;
}

void
ag_managed_free(struct ag_managed *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

float
ag_maxabs(const struct cais_quant_ops *q, const void *x, size_t count, enum cais_datatype dt)
{
	float mx = 0, buf[512];

	if (dt == CAIS_INT32)
		return 0;
	for (size_t k = 0; k < count; k += 512) {
		size_t n = count - k < 512 ? count - k : 512;
		const float *p = buf;

		if (dt == CAIS_FLOAT32)
			p = (const float *)x + k;
		else
			q->to_f32(buf, (const uint8_t *)x + k * 2, n, dt);
		for (size_t e = 0; e < n; e++) {
			float a = fabsf(p[e]);

			mx = a > mx ? a : mx; /* NaN never wins */
		}
	}
	return mx;
}

void
ag_managed_note(struct ag_managed *m, uint32_t tensor, float maxabs)
{
	unsigned int i;

	pthread_mutex_lock(&m->lock);
	for (i = 0; i < m->n_maxabs; i++)
		if (m->maxabs[i].tensor == tensor)
			break;
	if (i == m->n_maxabs && i < AG_MAX_MANAGED_TENSORS) {
		m->maxabs[i].tensor = tensor;
		m->maxabs[i].value = 0;
		m->n_maxabs++;
	}
	if (i < m->n_maxabs && maxabs > m->maxabs[i].value)
		m->maxabs[i].value = maxabs;
	pthread_mutex_unlock(&m->lock);
}
