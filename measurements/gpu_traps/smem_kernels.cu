// Traps 2 and 9 produced on purpose for Nsight Compute, each beside its fixed twin.
//
// trap 9 (shared-memory bank conflicts): a tiled matrix transpose through a 32 x 32 float tile in
// shared memory. Read back column-wise, the naive tile puts the 32 threads of a warp on one bank
// (a 32-way conflict); the padded tile (32 x 33) spreads them over all 32 banks.
//
// trap 2 (KV-cache layout): a paged-attention decode kernel (one query token per sequence,
// grouped-query heads, the keys and values in 16-token pages reached through a block table) over
// two layouts of the same cache: head-major pages, [page][kv_head][token][dim], where a warp reads
// one token's head as 256 contiguous bytes, and dim-major pages with the heads interleaved,
// [page][token][dim][kv_head], where the same read strides 16 bytes per element.
//
// Build and run (checks every output against a host reference, then times each kernel):
//   nvcc -O3 -arch=sm_90 -o smem_kernels measurements/gpu_traps/smem_kernels.cu
//   ./smem_kernels all            # check + time
//   ./smem_kernels transpose_naive   # one launch of one kernel, for ncu
// Variants: transpose_naive, transpose_padded, attn_head_major, attn_interleaved.

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t err_ = (x);                                                                   \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// ------------------------------------------------------------------------- trap 9: transpose

constexpr int TILE = 32;
constexpr int ROWS = 8;  // a 32 x 8 block moves a 32 x 32 tile, four rows per thread

template <int PAD>
__global__ void transpose_smem(float* __restrict__ out, const float* __restrict__ in, int n) {
  __shared__ float tile[TILE][TILE + PAD];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// ------------------------------------------------------------------------- trap 2: paged attention

constexpr int D = 128;       // head dim
constexpr int PAGE = 16;     // tokens per page
constexpr int HKV = 8;       // key/value heads
constexpr int GROUP = 4;     // query heads per key/value head
constexpr int HQ = HKV * GROUP;
constexpr int WARPS = 4;

enum Layout { HEAD_MAJOR = 0, INTERLEAVED = 1 };

template <int L>
__device__ __forceinline__ size_t kv_index(int page, int tok, int h, int d) {
  if (L == HEAD_MAJOR) return (((size_t)page * HKV + h) * PAGE + tok) * D + d;
  return (((size_t)page * PAGE + tok) * D + d) * HKV + h;
}

// lane l's four dims 4l..4l+3 of one token: one 8-byte load where they are contiguous, four
// 2-byte loads 16 bytes apart where the heads are interleaved
template <int L>
__device__ __forceinline__ void load4(const half* __restrict__ p, int page, int tok, int h, int lane, float* o) {
  if (L == HEAD_MAJOR) {
    uint2 raw = *reinterpret_cast<const uint2*>(p + kv_index<L>(page, tok, h, lane * 4));
    float2 a = __half22float2(*reinterpret_cast<half2*>(&raw.x));
    float2 b = __half22float2(*reinterpret_cast<half2*>(&raw.y));
    o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
  } else {
    for (int i = 0; i < 4; ++i) o[i] = __half2float(p[kv_index<L>(page, tok, h, lane * 4 + i)]);
  }
}

// grid (HQ, sequences), 4 warps: warp w takes tokens w, w+4, ...; lane l holds dims 4l..4l+3.
template <int L>
__global__ void paged_attention_decode(float* __restrict__ out, const half* __restrict__ q,
                                       const half* __restrict__ k, const half* __restrict__ v,
                                       const int* __restrict__ block_table, int pages_per_seq, int ctx) {
  int hq = blockIdx.x, seq = blockIdx.y, h = hq / GROUP;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float qd[4], acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int i = 0; i < 4; ++i) qd[i] = __half2float(q[((size_t)seq * HQ + hq) * D + lane * 4 + i]);
  float m = -INFINITY, l = 0.f;
  const float scale = rsqrtf((float)D);
  for (int t = warp; t < ctx; t += WARPS) {
    int page = block_table[seq * pages_per_seq + t / PAGE], tok = t % PAGE;
    float kd[4], vd[4], s = 0.f;
    load4<L>(k, page, tok, h, lane, kd);
    for (int i = 0; i < 4; ++i) s += qd[i] * kd[i];
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    s *= scale;
    float m2 = fmaxf(m, s), c = __expf(m - m2), p = __expf(s - m2);
    l = l * c + p;
    load4<L>(v, page, tok, h, lane, vd);
    for (int i = 0; i < 4; ++i) acc[i] = acc[i] * c + p * vd[i];
    m = m2;
  }
  __shared__ float sm[WARPS], sl[WARPS], sacc[WARPS][D];
  if (lane == 0) sm[warp] = m, sl[warp] = l;
  for (int i = 0; i < 4; ++i) sacc[warp][lane * 4 + i] = acc[i];
  __syncthreads();
  if (warp == 0) {
    float mm = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, sm[w]);
    float ll = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    for (int w = 0; w < WARPS; ++w) {
      float c = __expf(sm[w] - mm);
      ll += sl[w] * c;
      for (int i = 0; i < 4; ++i) o[i] += sacc[w][lane * 4 + i] * c;
    }
    for (int i = 0; i < 4; ++i) out[((size_t)seq * HQ + hq) * D + lane * 4 + i] = o[i] / ll;
  }
}

// ------------------------------------------------------------------------- host

static float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

template <typename F>
static float time_median(F launch, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < reps + 2; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    if (r >= 2) t.push_back(elapsed_ms(a, b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static int transpose(bool padded, bool check, int reps) {
  const int n = 8192;
  const size_t bytes = (size_t)n * n * sizeof(float);
  std::vector<float> h(n * (size_t)n), r(n * (size_t)n);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  for (auto& x : h) x = U(rng);
  float *din, *dout;
  CHECK(cudaMalloc(&din, bytes));
  CHECK(cudaMalloc(&dout, bytes));
  CHECK(cudaMemcpy(din, h.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dout, 0xff, bytes));  // NaN: an unwritten element fails the check
  dim3 grid(n / TILE, n / TILE), block(TILE, ROWS);
  auto launch = [&] {
    if (padded)
      transpose_smem<1><<<grid, block>>>(dout, din, n);
    else
      transpose_smem<0><<<grid, block>>>(dout, din, n);
  };
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  int bad = 0;
  if (check) {
    CHECK(cudaMemcpy(r.data(), dout, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n && bad < 5; ++i)
      for (int j = 0; j < n; ++j)
        if (r[(size_t)j * n + i] != h[(size_t)i * n + j]) {
          ++bad;
          break;
        }
    float ms = time_median(launch, reps);
    std::printf("{\"trap\": 9, \"kernel\": \"%s\", \"ms\": %.4f, \"gbs\": %.1f, \"correct\": %s}\n",
                padded ? "transpose_padded" : "transpose_naive", ms, 2.0 * bytes / ms / 1e6,
                bad ? "false" : "true");
  }
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  return bad ? 1 : 0;
}

static int attention(int layout, bool check, int reps) {
  const int seqs = 32, ctx = 2048, pps = ctx / PAGE, pages = seqs * pps;
  const size_t kv_elems = (size_t)pages * PAGE * HKV * D, q_elems = (size_t)seqs * HQ * D;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> N(-1.f, 1.f);
  // logical cache K[seq][t][h][d], V likewise; laid out in pages through a shuffled block table
  std::vector<float> K(kv_elems), V(kv_elems), Q(q_elems);
  for (auto& x : K) x = __half2float(__float2half(N(rng)));
  for (auto& x : V) x = __half2float(__float2half(N(rng)));
  for (auto& x : Q) x = __half2float(__float2half(N(rng)));
  std::vector<int> table(pages);
  for (int i = 0; i < pages; ++i) table[i] = i;
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<half> hk(kv_elems), hv(kv_elems), hq(q_elems);
  for (size_t i = 0; i < q_elems; ++i) hq[i] = __float2half(Q[i]);
  for (int s = 0; s < seqs; ++s)
    for (int t = 0; t < ctx; ++t)
      for (int h = 0; h < HKV; ++h)
        for (int d = 0; d < D; ++d) {
          size_t src = (((size_t)s * ctx + t) * HKV + h) * D + d;
          int page = table[s * pps + t / PAGE], tok = t % PAGE;
          size_t dst = layout == HEAD_MAJOR ? (((size_t)page * HKV + h) * PAGE + tok) * D + d
                                            : (((size_t)page * PAGE + tok) * D + d) * HKV + h;
          hk[dst] = __float2half(K[src]);
          hv[dst] = __float2half(V[src]);
        }
  half *dk, *dv, *dq;
  float* dout;
  int* dt;
  CHECK(cudaMalloc(&dk, kv_elems * sizeof(half)));
  CHECK(cudaMalloc(&dv, kv_elems * sizeof(half)));
  CHECK(cudaMalloc(&dq, q_elems * sizeof(half)));
  CHECK(cudaMalloc(&dout, q_elems * sizeof(float)));
  CHECK(cudaMalloc(&dt, pages * sizeof(int)));
  CHECK(cudaMemcpy(dk, hk.data(), kv_elems * sizeof(half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, hv.data(), kv_elems * sizeof(half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dq, hq.data(), q_elems * sizeof(half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dt, table.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dout, 0xff, q_elems * sizeof(float)));
  dim3 grid(HQ, seqs), block(32 * WARPS);
  auto launch = [&] {
    if (layout == HEAD_MAJOR)
      paged_attention_decode<HEAD_MAJOR><<<grid, block>>>(dout, dq, dk, dv, dt, pps, ctx);
    else
      paged_attention_decode<INTERLEAVED><<<grid, block>>>(dout, dq, dk, dv, dt, pps, ctx);
  };
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  int bad = 0;
  if (check) {
    std::vector<float> o(q_elems);
    CHECK(cudaMemcpy(o.data(), dout, q_elems * sizeof(float), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int s = 0; s < seqs; s += 7)  // a host reference in double for every 7th sequence
      for (int hqi = 0; hqi < HQ; ++hqi) {
        int h = hqi / GROUP;
        std::vector<double> sc(ctx);
        double mx = -1e300;
        for (int t = 0; t < ctx; ++t) {
          double a = 0;
          for (int d = 0; d < D; ++d) a += (double)Q[((size_t)s * HQ + hqi) * D + d] * K[(((size_t)s * ctx + t) * HKV + h) * D + d];
          sc[t] = a / std::sqrt((double)D);
          mx = std::max(mx, sc[t]);
        }
        double z = 0;
        for (int t = 0; t < ctx; ++t) z += (sc[t] = std::exp(sc[t] - mx));
        for (int d = 0; d < D; ++d) {
          double ref = 0;
          for (int t = 0; t < ctx; ++t) ref += sc[t] / z * V[(((size_t)s * ctx + t) * HKV + h) * D + d];
          double got = o[((size_t)s * HQ + hqi) * D + d];
          if (!std::isfinite(got)) ++bad;
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
      }
    double rel = std::sqrt(num / den);
    if (!(rel < 1e-3)) ++bad;
    float ms = time_median(launch, reps);
    double kv_bytes = 2.0 * kv_elems * sizeof(half);
    std::printf("{\"trap\": 2, \"kernel\": \"%s\", \"ms\": %.4f, \"kv_gbs\": %.1f, \"rel_err\": %.2e, \"correct\": %s}\n",
                layout == HEAD_MAJOR ? "attn_head_major" : "attn_interleaved", ms, kv_bytes / ms / 1e6, rel,
                bad ? "false" : "true");
  }
  CHECK(cudaFree(dk));
  CHECK(cudaFree(dv));
  CHECK(cudaFree(dq));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dt));
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "all";
  bool all = !std::strcmp(which, "all");
  int rc = 0;
  // alone (for ncu): one launch, no check; "all": check and time each
  if (all || !std::strcmp(which, "transpose_naive")) rc |= transpose(false, all, 20);
  if (all || !std::strcmp(which, "transpose_padded")) rc |= transpose(true, all, 20);
  if (all || !std::strcmp(which, "attn_head_major")) rc |= attention(HEAD_MAJOR, all, 10);
  if (all || !std::strcmp(which, "attn_interleaved")) rc |= attention(INTERLEAVED, all, 10);
  return rc;
}
