// emulator.cc runs the CUDA kernels of ../src/ on the CPU, for the cudaemu
// build of the backend (see cuda_emu.h beside this file for how, and for
// what it cannot show). The .cu files are compiled unchanged, all in this
// one translation unit. cgo compiles only the C/C++ files of the package's
// own folder, so the one-line ../emulator.cc includes this file.
#include "cuda_emu.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../src/add.cu"
#include "../src/argmax.cu"
#include "../src/attention.cu"
#include "../src/copy_block.cu"
#include "../src/gather_rows.cu"
#include "../src/gemma.cu"
#include "../src/matmul.cu"
#include "../src/rmsnorm.cu"
#include "../src/rmsnorm_heads.cu"
#include "../src/rope.cu"
#include "../src/silu_mul.cu"
#include "../src/softmax.cu"
#include "../src/write_kv.cu"

dim3 threadIdx;
dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace {

// Kernel arguments arrive as the 8-byte values the Go side would hand to
// cuLaunchKernel; these unpack them into the kernels' parameter types.
template <class T>
T ptr(const uint64_t* a, int i) { return reinterpret_cast<T>(static_cast<uintptr_t>(a[i])); }
long long ll(const uint64_t* a, int i) { return static_cast<long long>(a[i]); }
double dbl(const uint64_t* a, int i) {
    double d;
    std::memcpy(&d, &a[i], 8);
    return d;
}

using invoker = void (*)(const uint64_t*);

struct entry {
    const char* name;
    int nargs;
    invoker fn;
};

#define ATTN_ENTRY_KV(NAME, T, N)                                                                      \
    {#NAME #N, 16, [](const uint64_t* a) {                                                             \
         NAME##N(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const T*>(a, 2), ptr<const T*>(a, 3), \
                 ptr<const int*>(a, 4), ptr<const int*>(a, 5), ptr<const int*>(a, 6), ll(a, 7), ll(a, 8), \
                 ll(a, 9), ll(a, 10), dbl(a, 11), ll(a, 12), ptr<float*>(a, 13), ll(a, 14), dbl(a, 15)); \
     }}
#define ATTN_ENTRY(N)                                          \
    ATTN_ENTRY_KV(paged_attention_d, float, N),                \
        ATTN_ENTRY_KV(paged_attention_bf16_d, unsigned short, N), \
        ATTN_ENTRY_KV(paged_attention_f16_d, unsigned short, N)

#define MATMUL_ENTRY(NAME, W)                                                                          \
    {#NAME, 7, [](const uint64_t* a) {                                                                 \
         NAME(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const W*>(a, 2), ll(a, 3), ll(a, 4),      \
              ll(a, 5), ll(a, 6));                                                                     \
     }}

const entry kernels[] = {
    {"add", 3, [](const uint64_t* a) { add(ptr<float*>(a, 0), ptr<const float*>(a, 1), ll(a, 2)); }},
    {"silu_mul", 4,
     [](const uint64_t* a) {
         silu_mul(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const float*>(a, 2), ll(a, 3));
     }},
    {"rmsnorm", 5,
     [](const uint64_t* a) {
         rmsnorm(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const float*>(a, 2), ll(a, 3), dbl(a, 4));
     }},
    {"rmsnorm_heads", 5,
     [](const uint64_t* a) {
         rmsnorm_heads(ptr<float*>(a, 0), ptr<const float*>(a, 1), ll(a, 2), ll(a, 3), dbl(a, 4));
     }},
    {"rope", 5,
     [](const uint64_t* a) {
         rope(ptr<float*>(a, 0), ptr<const int*>(a, 1), ptr<const float*>(a, 2), ll(a, 3), ll(a, 4));
     }},
    {"gather_rows", 4,
     [](const uint64_t* a) {
         gather_rows(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const int*>(a, 2), ll(a, 3));
     }},
    {"write_kv", 6,
     [](const uint64_t* a) {
         write_kv(ptr<float*>(a, 0), ptr<float*>(a, 1), ptr<const float*>(a, 2), ptr<const float*>(a, 3),
                  ptr<const int*>(a, 4), ll(a, 5));
     }},
    {"copy_block", 5,
     [](const uint64_t* a) {
         copy_block(ptr<float*>(a, 0), ptr<float*>(a, 1), ll(a, 2), ll(a, 3), ll(a, 4));
     }},
    {"write_kv_bf16", 6,
     [](const uint64_t* a) {
         write_kv_bf16(ptr<unsigned short*>(a, 0), ptr<unsigned short*>(a, 1), ptr<float*>(a, 2),
                       ptr<float*>(a, 3), ptr<const int*>(a, 4), ll(a, 5));
     }},
    {"write_kv_f16", 6,
     [](const uint64_t* a) {
         write_kv_f16(ptr<unsigned short*>(a, 0), ptr<unsigned short*>(a, 1), ptr<float*>(a, 2),
                      ptr<float*>(a, 3), ptr<const int*>(a, 4), ll(a, 5));
     }},
    {"copy_block16", 5,
     [](const uint64_t* a) {
         copy_block16(ptr<unsigned short*>(a, 0), ptr<unsigned short*>(a, 1), ll(a, 2), ll(a, 3), ll(a, 4));
     }},
    {"gelu_tanh_mul", 4,
     [](const uint64_t* a) {
         gelu_tanh_mul(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const float*>(a, 2), ll(a, 3));
     }},
    {"soft_cap", 3, [](const uint64_t* a) { soft_cap(ptr<float*>(a, 0), ll(a, 1), dbl(a, 2)); }},
    {"scale", 3, [](const uint64_t* a) { scale(ptr<float*>(a, 0), ll(a, 1), dbl(a, 2)); }},
    {"softmax_rows", 2, [](const uint64_t* a) { softmax_rows(ptr<float*>(a, 0), ll(a, 1)); }},
    {"argmax_rows", 3,
     [](const uint64_t* a) { argmax_rows(ptr<int*>(a, 0), ptr<const float*>(a, 1), ll(a, 2)); }},
    {"matmul_sum_slices", 4,
     [](const uint64_t* a) {
         matmul_sum_slices(ptr<float*>(a, 0), ptr<const float*>(a, 1), ll(a, 2), ll(a, 3));
     }},
    MATMUL_ENTRY(matmul_bf16_128, float),
    MATMUL_ENTRY(matmul_bf16_64, float),
    MATMUL_ENTRY(matmul_bf16w_128, unsigned short),
    MATMUL_ENTRY(matmul_bf16w_64, unsigned short),
    {"matmul_bf16w_skinny", 8,
     [](const uint64_t* a) {
         matmul_bf16w_skinny(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const unsigned short*>(a, 2),
                             ll(a, 3), ll(a, 4), ll(a, 5), ll(a, 6), ptr<float*>(a, 7));
     }},
    {"gather_rows_bf16", 4,
     [](const uint64_t* a) {
         gather_rows_bf16(ptr<float*>(a, 0), ptr<const unsigned short*>(a, 1), ptr<const int*>(a, 2), ll(a, 3));
     }},
    {"matmul_bf16_skinny", 8,
     [](const uint64_t* a) {
         matmul_bf16_skinny(ptr<float*>(a, 0), ptr<const float*>(a, 1), ptr<const float*>(a, 2), ll(a, 3),
                            ll(a, 4), ll(a, 5), ll(a, 6), ptr<float*>(a, 7));
     }},
    {"attention_merge", 7,
     [](const uint64_t* a) {
         attention_merge(ptr<float*>(a, 0), ptr<float*>(a, 1), ptr<const int*>(a, 2), ptr<const int*>(a, 3),
                         ll(a, 4), ll(a, 5), ll(a, 6));
     }},
    ATTN_ENTRY(32),
    ATTN_ENTRY(64),
    ATTN_ENTRY(128),
    ATTN_ENTRY(256),
};

// The scheduler: every CUDA thread of the running block is a coroutine.
// A coroutine runs until it waits at a barrier (or returns), then hands
// control back here, and the scheduler resumes the next one in turn. A
// shuffle costs two warp barriers, so an attention tile switches tens of
// thousands of times: on x86-64 the switch is a few instructions of our own
// (glibc's swapcontext also saves the signal mask, a system call each time);
// elsewhere it falls back to swapcontext.
constexpr size_t stack_bytes = 256 << 10; // an emulated WMMA fragment takes 1 KB

#if defined(__x86_64__)
struct context {
    void* sp = nullptr;
};

// emu_switch saves the callee-saved registers and the SSE and x87 control
// words on the current stack, stores the stack pointer in *from, then
// restores the context whose saved stack pointer is `to` and returns there.
extern "C" void emu_switch(void** from, void* to);
asm(R"(
    .text
    .p2align 4
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");

inline void switch_context(context& from, context& to) { emu_switch(&from.sp, to.sp); }

// init_context lays out a fresh stack as if emu_switch had been called from
// entry's first instruction: the return address, six zeroed registers and
// the default control words, aligned so that entry starts with the stack
// alignment the ABI promises a called function.
void init_context(context& c, char* stack, void (*entry)()) {
    const uintptr_t slot = ((uintptr_t)(stack + stack_bytes) & ~(uintptr_t)15) - 16;
    uint64_t* p = (uint64_t*)slot;
    p[0] = (uint64_t)(uintptr_t)entry;
    for (int i = 1; i <= 6; ++i) p[-i] = 0;
    uint32_t* cw = (uint32_t*)(slot - 56);
    cw[0] = 0x1f80; // MXCSR: all exceptions masked, round to nearest
    cw[1] = 0x037f; // x87 control word: the same
    c.sp = (void*)(slot - 56);
}
#else
struct context {
    ucontext_t uc;
};

inline void switch_context(context& from, context& to) { swapcontext(&from.uc, &to.uc); }

void init_context(context& c, char* stack, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = stack_bytes;
    c.uc.uc_link = nullptr; // entry never returns
    makecontext(&c.uc, entry, 0);
}
#endif

// async_copy is one queued cp.async of a thread, in group `group` (the
// thread's count of commits when it was issued).
struct async_copy {
    void* dst;
    const void* src;
    int bytes, size;
    unsigned group;
};

struct coroutine {
    context ctx;
    bool done = false;
    std::vector<async_copy> copies; // issued, not yet performed
    unsigned committed = 0;         // groups closed so far
};

struct block_state {
    invoker fn = nullptr;
    const uint64_t* args = nullptr;
    std::vector<coroutine> co;
    context sched;
    int cur = 0;
    int live = 0;
    unsigned block_arrived = 0, block_gen = 0;
    std::vector<unsigned> warp_arrived, warp_gen, warp_live;
    std::vector<uint64_t> slots; // 32 per warp
};

block_state* state;                               // the block being run
std::mutex launch_lock;                           // one grid at a time, even with several backends
std::vector<std::unique_ptr<char[]>> stack_pool;  // kept across launches: only touched pages cost memory

void yield_to_scheduler() { switch_context(state->co[state->cur].ctx, state->sched); }

[[noreturn]] void coroutine_entry() {
    state->fn(state->args);
    state->co[state->cur].done = true;
    switch_context(state->co[state->cur].ctx, state->sched); // never resumed
    __builtin_unreachable();
}

// wait_at is one barrier over `live` participants: the last to arrive opens
// it, the others yield until it opens.
void wait_at(unsigned& arrived, unsigned& gen, unsigned live) {
    const unsigned g = gen;
    if (++arrived == live) {
        arrived = 0;
        ++gen;
        return;
    }
    while (gen == g) yield_to_scheduler();
}

void run_block(block_state& b, unsigned threads) {
    b.co.assign(threads, coroutine{});
    b.live = (int)threads;
    const unsigned warps = threads / 32;
    b.warp_arrived.assign(warps, 0);
    b.warp_gen.assign(warps, 0);
    b.warp_live.assign(warps, 32);
    b.slots.assign(warps * 32, 0);
    b.block_arrived = 0;
    for (unsigned t = 0; t < threads; ++t) init_context(b.co[t].ctx, stack_pool[t].get(), coroutine_entry);
    while (b.live > 0) {
        for (unsigned t = 0; t < threads; ++t) {
            if (b.co[t].done) continue;
            b.cur = (int)t;
            threadIdx = dim3{t, 0, 0};
            switch_context(b.sched, b.co[t].ctx);
            if (b.co[t].done) {
                --b.live;
                --b.warp_live[t / 32];
                if (!b.co[t].copies.empty()) {
                    std::fprintf(stderr, "emulator: thread %u of block (%u, %u) exited with %zu cp.async copies not waited for\n",
                                 t, blockIdx.x, blockIdx.y, b.co[t].copies.size());
                    std::abort();
                }
            }
        }
    }
}

std::vector<float4> dyn_shared; // the launch's dynamic shared memory, 16-byte aligned
size_t dyn_bytes = 0;

void run_grid(invoker fn, int gx, int gy, int block, int shared, const uint64_t* args) {
    while (stack_pool.size() < (size_t)block) stack_pool.emplace_back(new char[stack_bytes]);
    dyn_bytes = (size_t)shared;
    dyn_shared.resize((dyn_bytes + sizeof(float4) - 1) / sizeof(float4));
    block_state b;
    b.fn = fn;
    b.args = args;
    state = &b;
    gridDim = dim3{(unsigned)gx, (unsigned)gy, 1};
    blockDim = dim3{(unsigned)block, 1, 1};
    for (int by = 0; by < gy; ++by) {
        for (int bx = 0; bx < gx; ++bx) {
            blockIdx = dim3{(unsigned)bx, (unsigned)by, 0};
            run_block(b, (unsigned)block);
        }
    }
    state = nullptr;
}

} // namespace

void emu_sync_block() { wait_at(state->block_arrived, state->block_gen, (unsigned)state->live); }

void emu_sync_warp() {
    const unsigned w = threadIdx.x / 32;
    wait_at(state->warp_arrived[w], state->warp_gen[w], state->warp_live[w]);
}

uint64_t* emu_warp_slots() { return &state->slots[(threadIdx.x / 32) * 32]; }

void emu_cp_async(void* dst, const void* src, int src_bytes, int size) {
    coroutine& c = state->co[state->cur];
    c.copies.push_back(async_copy{dst, src, src_bytes, size, c.committed});
}

void emu_cp_async_commit() { ++state->co[state->cur].committed; }

void emu_cp_async_wait(int newest_pending) {
    coroutine& c = state->co[state->cur];
    // Groups g < committed - newest_pending must be complete.
    const unsigned limit = c.committed >= (unsigned)newest_pending ? c.committed - (unsigned)newest_pending : 0;
    size_t kept = 0;
    for (const async_copy& a : c.copies) {
        if (a.group < limit) {
            std::memcpy(a.dst, a.src, (size_t)a.bytes);
            std::memset((char*)a.dst + a.bytes, 0, (size_t)(a.size - a.bytes));
        } else {
            c.copies[kept++] = a;
        }
    }
    c.copies.resize(kept);
}

unsigned char* emu_dynamic_shared(size_t bytes) {
    if (bytes > dyn_bytes) {
        std::fprintf(stderr, "emulator: kernel needs %zu bytes of dynamic shared memory, launched with %zu\n", bytes,
                     dyn_bytes);
        std::abort();
    }
    return reinterpret_cast<unsigned char*>(dyn_shared.data());
}

extern "C" {

// emu_kernel returns the index of the kernel called name, or -1.
int emu_kernel(const char* name) {
    for (int i = 0; i < (int)(sizeof kernels / sizeof kernels[0]); ++i) {
        if (std::strcmp(kernels[i].name, name) == 0) return i;
    }
    return -1;
}

// emu_launch runs kernel k on a gx×gy grid of block-thread blocks with
// shared bytes of dynamic shared memory and returns 0, or -1 for a launch
// the GPU would refuse too (227 KB is the most an H100 block may have). It runs on a
// thread of its own, so that the coroutines' stack switching never happens
// on a thread the Go runtime manages.
int emu_launch(int k, int gx, int gy, int block, int shared, const uint64_t* args, int nargs) {
    if (k < 0 || nargs != kernels[k].nargs || block <= 0 || block > 1024 || block % 32 != 0) return -1;
    if (shared < 0 || shared > 227 * 1024) return -1;
    std::lock_guard<std::mutex> hold(launch_lock);
    std::thread worker([=] { run_grid(kernels[k].fn, gx, gy, block, shared, args); });
    worker.join();
    return 0;
}

// Device memory is host memory, aligned like cuMemAlloc's.
uint64_t emu_alloc(uint64_t bytes) {
    return (uint64_t)(uintptr_t)std::aligned_alloc(256, (bytes + 255) / 256 * 256);
}
void emu_free(uint64_t p) { std::free((void*)(uintptr_t)p); }
void emu_zero(uint64_t p, uint64_t bytes) { std::memset((void*)(uintptr_t)p, 0, bytes); }
void emu_htod(uint64_t dst, const void* src, uint64_t bytes) { std::memcpy((void*)(uintptr_t)dst, src, bytes); }
void emu_dtoh(void* dst, uint64_t src, uint64_t bytes) { std::memcpy(dst, (const void*)(uintptr_t)src, bytes); }

} // extern "C"
