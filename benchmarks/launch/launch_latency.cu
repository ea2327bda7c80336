// Kernel-launch latency of a chain of dependent kernels, three ways (docs/baseline.md, "Launch
// overhead"): each launch followed by a stream synchronization (what timing every instruction on
// its own sees), launches queued back to back in one stream (eager, asynchronous), and the same
// chain captured once as a CUDA graph and replayed. Every kernel touches one small array, so
// its own work is a few hundred nanoseconds; the chain's time per kernel less that is the
// overhead of a launch. Prints JSON; build: nvcc -O2 -o launch_latency launch_latency.cu
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void step(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + 1.0f;
}

__global__ void empty() {}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
  const int chain = 2000, n = 1024, repeats = 5;
  float *x;
  cudaStream_t s;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaStreamCreate(&s));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);

  for (int i = 0; i < 100; i++) step<<<4, 256, 0, s>>>(x, n);      // warm up
  CHECK(cudaStreamSynchronize(s));

  double best_sync = 1e9, best_async = 1e9, best_graph = 1e9, best_empty = 1e9;
  for (int r = 0; r < repeats; r++) {
    double t = now();
    for (int i = 0; i < chain; i++) { step<<<4, 256, 0, s>>>(x, n); cudaStreamSynchronize(s); }
    best_sync = fmin(best_sync, (now() - t) / chain);

    t = now();
    for (int i = 0; i < chain; i++) step<<<4, 256, 0, s>>>(x, n);
    CHECK(cudaStreamSynchronize(s));
    best_async = fmin(best_async, (now() - t) / chain);

    t = now();
    for (int i = 0; i < chain; i++) empty<<<1, 32, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    best_empty = fmin(best_empty, (now() - t) / chain);
  }

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < chain; i++) step<<<4, 256, 0, s>>>(x, n);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s));                                   // warm up
  CHECK(cudaStreamSynchronize(s));
  for (int r = 0; r < repeats; r++) {
    double t = now();
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    best_graph = fmin(best_graph, (now() - t) / chain);
  }
  printf("{\"device\": \"%s\", \"cuda_runtime\": %d, \"cuda_driver\": %d, \"chain\": %d, "
         "\"sync_each_us\": %.3f, \"async_us\": %.3f, \"async_empty_us\": %.3f, "
         "\"graph_us\": %.3f}\n", prop.name, runtime, driver, chain, best_sync * 1e6,
         best_async * 1e6, best_empty * 1e6, best_graph * 1e6);
  return 0;
}
