/*
 * Tensor, pipeline and expert parallelism: the split rules of one tensor,
 * the vocabulary padding and the layers of a pipeline stage.  The model
 * generators (models.c) say which rule each tensor follows.
 */
#include "dbuf/parallel.h"
#include "dbuf/tensors.h"
#include "core_internal.h"

#include <string.h>

void
dbuf_parallel_init(dbuf_parallel_t *p)
{
  if (p == NULL)
    return;
  memset(p, 0, sizeof *p);
  p->tp = p->pp = p->ep = 1;
  p->vocab_divisor = DBUF_PARALLEL_VOCAB_DIVISOR;
  p->naming = DBUF_NAMING_HF;
}

int64_t
dbuf_parallel_expert_tp(const dbuf_parallel_t *p)
{
  if (p == NULL)
    return 1;
  return p->expert_tp > 0 ? p->expert_tp : p->tp;
}

int
dbuf_parallel_check(const dbuf_parallel_t *p, dbuf_diag_t *diag)
{
  if (p == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL parallel settings");
  if (p->tp < 1 || p->pp < 1 || p->ep < 1 || p->expert_tp < 0 || p->vocab_divisor < 1)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "parallel degrees must be >= 1 (tp %lld, pp %lld, ep %lld, "
                      "expert tp %lld, vocab divisor %lld)",
                      (long long)p->tp, (long long)p->pp, (long long)p->ep,
                      (long long)p->expert_tp, (long long)p->vocab_divisor);
  if (p->naming != DBUF_NAMING_HF && p->naming != DBUF_NAMING_MEGATRON)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown naming %d", (int)p->naming);
  if (p->stage < 0 || p->stage >= p->pp)
    return dbuf__diag(diag, DBUF_EINVAL, "stage %lld out of range: --pp %lld has stages 0..%lld",
                      (long long)p->stage, (long long)p->pp, (long long)p->pp - 1);
  if (p->npp_layers != 0 && p->npp_layers != p->pp)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "--pp-layers names %lld stages, --pp is %lld", (long long)p->npp_layers,
                      (long long)p->pp);
  if (p->npp_layers > DBUF_PARALLEL_MAX_PP)
    return dbuf__diag(diag, DBUF_EINVAL, "--pp-layers: more than %d stages",
                      DBUF_PARALLEL_MAX_PP);
  for (int64_t s = 0; s < p->npp_layers; s++) {
    if (p->pp_layers[s] < 1)
      return dbuf__diag(diag, DBUF_EINVAL,
                        "--pp-layers: stage %lld has %lld layers (each stage needs >= 1)",
                        (long long)s, (long long)p->pp_layers[s]);
  }
  return 0;
}

int
dbuf_parallel_pad_vocab(int64_t vocab, int64_t divisor, int64_t tp, int64_t *padded)
{
  int64_t m;
  if (padded == NULL || vocab < 0 || divisor < 1 || tp < 1)
    return DBUF_EINVAL;
  if (dbuf__mul(divisor, tp, &m) != 0)
    return DBUF_EOVERFLOW;
  return dbuf__round_up(vocab, m, padded);
}

int
dbuf_parallel_stage_layers(const dbuf_parallel_t *p, int64_t layers, int64_t *first,
                           int64_t *count, dbuf_diag_t *diag)
{
  int rc;
  if (first == NULL || count == NULL || layers < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or negative layer count");
  if ((rc = dbuf_parallel_check(p, diag)) != 0)
    return rc;
  if (p->npp_layers == 0) {
    if (layers % p->pp != 0)
      return dbuf__diag(diag, DBUF_EPARALLEL,
                        "num_layers (%lld) is not divisible by --pp %lld; give the layers "
                        "of each stage with --pp-layers",
                        (long long)layers, (long long)p->pp);
    *first = p->stage * (layers / p->pp);
    *count = layers / p->pp;
    return 0;
  }
  int64_t sum = 0, before = 0;
  for (int64_t s = 0; s < p->pp; s++) {
    if (s == p->stage)
      before = sum;
    if (dbuf__add(sum, p->pp_layers[s], &sum) != 0)
      return dbuf__diag(diag, DBUF_EOVERFLOW, "--pp-layers: the sum overflows 64 bits");
  }
  if (sum != layers)
    return dbuf__diag(diag, DBUF_EPARALLEL,
                      "--pp-layers adds up to %lld layers, the model has num_layers %lld",
                      (long long)sum, (long long)layers);
  *first = before;
  *count = p->pp_layers[p->stage];
  return 0;
}

/* dims[k] / degree, or DBUF_EPARALLEL naming the tensor, the dim and the option. */
static int
divide(const char *name, int k, int64_t n, int64_t degree, const char *opt, int64_t *out,
       dbuf_diag_t *diag)
{
  if (n % degree != 0)
    return dbuf__diag(diag, DBUF_EPARALLEL,
                      "tensor %s: dim %d (%lld) is not divisible by %s %lld", name, k,
                      (long long)n, opt, (long long)degree);
  *out = n / degree;
  return 0;
}

int
dbuf_parallel_split(const dbuf_parallel_t *p, dbuf_split_t kind, const char *name, int ndim,
                    const int64_t *dims, int64_t *local, int64_t *padding, dbuf_diag_t *diag)
{
  int64_t et, pad = 0, half;
  int rc = 0;
  if (p == NULL || name == NULL || dims == NULL || local == NULL || ndim < 1 ||
      ndim > DBUF_MAX_DIMS)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument or bad dim count");
  et = dbuf_parallel_expert_tp(p);
  memcpy(local, dims, (size_t)ndim * sizeof *local);
  switch (kind) {
  case DBUF_SPLIT_REPLICATED:
    break;
  case DBUF_SPLIT_COLUMN:
    rc = divide(name, 0, dims[0], p->tp, "--tp", &local[0], diag);
    break;
  case DBUF_SPLIT_EXPERT_COLUMN:
    rc = divide(name, 0, dims[0], et, "--expert-tp", &local[0], diag);
    break;
  case DBUF_SPLIT_COLUMN_GLU:
  case DBUF_SPLIT_EXPERT_COLUMN_GLU: {
    /* Gate and up are cut separately: each half must divide. */
    int64_t deg = kind == DBUF_SPLIT_COLUMN_GLU ? p->tp : et;
    const char *opt = kind == DBUF_SPLIT_COLUMN_GLU ? "--tp" : "--expert-tp";
    if (dims[0] % 2 != 0)
      return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: fused gate and up with odd dim 0 (%lld)",
                        name, (long long)dims[0]);
    if (dims[0] / 2 % deg != 0)
      return dbuf__diag(diag, DBUF_EPARALLEL,
                        "tensor %s: dim 0 holds gate and up of %lld rows each, not "
                        "divisible by %s %lld",
                        name, (long long)(dims[0] / 2), opt, (long long)deg);
    half = dims[0] / 2 / deg;
    local[0] = 2 * half;
    break;
  }
  case DBUF_SPLIT_ROW:
  case DBUF_SPLIT_EXPERT_ROW:
    if (ndim < 2)
      return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: a row-parallel split needs 2 dims", name);
    rc = kind == DBUF_SPLIT_ROW ? divide(name, 1, dims[1], p->tp, "--tp", &local[1], diag)
                                : divide(name, 1, dims[1], et, "--expert-tp", &local[1], diag);
    break;
  case DBUF_SPLIT_VOCAB: {
    int64_t vp;
    rc = dbuf_parallel_pad_vocab(dims[0], p->vocab_divisor, p->tp, &vp);
    if (rc != 0)
      return dbuf__diag(diag, rc, "tensor %s: padding the vocabulary %lld: %s", name,
                        (long long)dims[0], dbuf_strerror(rc));
    pad = vp - dims[0];
    local[0] = vp / p->tp;
    break;
  }
  default:
    return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: unknown split %d", name, (int)kind);
  }
  if (rc == 0 && padding != NULL)
    *padding = pad;
  return rc;
}

const char *
dbuf_naming_name(dbuf_naming_t n)
{
  switch (n) {
  case DBUF_NAMING_HF:
    return "hf";
  case DBUF_NAMING_MEGATRON:
    return "megatron";
  default:
    return "?";
  }
}

int
dbuf_naming_parse(const char *text, dbuf_naming_t *out)
{
  if (text == NULL || out == NULL)
    return DBUF_EINVAL;
  if (strcmp(text, "hf") == 0)
    *out = DBUF_NAMING_HF;
  else if (strcmp(text, "megatron") == 0)
    *out = DBUF_NAMING_MEGATRON;
  else
    return DBUF_EINVAL;
  return 0;
}
