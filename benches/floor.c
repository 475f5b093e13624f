/* The floor: the least a tracer must do for `BEGIN { printf("x\n"); exit(); }` (and `BEGIN { exit(); }`), as
 * steadytrace does it: a BPF ring buffer created, one raw tracepoint program loaded that writes one record into
 * it, the program run once by BPF_PROG_TEST_RUN (how steadytrace runs BEGIN), the ring mapped and the record
 * read, "x\n" written to the standard output, exit. Raw bpf() system calls, no libbpf, no stdio, no allocation.
 * Built static by benches/floor.sh (gcc -static -O2); measured beside steadytrace by benches/startup.py --floor.
 *
 *     floor printf    BEGIN { printf("x\n"); exit(); }: the record carries the format's id, "x\n" is printed
 *     floor exit      BEGIN { exit(); }: the record is the exit request, nothing is printed
 *     floor nothing   no BPF at all: the process alone (exec, a static binary's start, exit), the measure's own floor
 *
 * The ring is one page, as steadytrace sizes it for these scripts, and mapped as libbpf maps it (the consumer
 * page read-write, the producer page and the data twice read-only), which is resident memory from the start. */
#include <linux/bpf.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING_BYTES 4096
#define RECORD_PRINTF 1
#define RECORD_EXIT 2

static long bpf(int cmd, union bpf_attr *attr) {
    return syscall(__NR_bpf, cmd, attr, sizeof *attr);
}

static int fail(const char *what) {
    write(2, "floor: ", 7);
    write(2, what, strlen(what));
    write(2, " failed\n", 8);
    return 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "printf";
    if (strcmp(mode, "nothing") == 0)
        return 0;
    int32_t record = strcmp(mode, "exit") == 0 ? RECORD_EXIT : RECORD_PRINTF;

    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_RINGBUF;
    attr.max_entries = RING_BYTES;
    int ring = bpf(BPF_MAP_CREATE, &attr);
    if (ring < 0)
        return fail("BPF_MAP_CREATE");

    /* *(u64 *)(r10 - 8) = record; bpf_ringbuf_output(ring, r10 - 8, 8, 0); return 0; */
    struct bpf_insn insns[] = {
        {.code = BPF_ST | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_10, .off = -8, .imm = record},
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = ring},
        {0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10},
        {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -8},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = 8},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_4, .imm = 0},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_ringbuf_output},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.insn_cnt = sizeof insns / sizeof insns[0];
    attr.license = (uint64_t)(uintptr_t)"GPL";
    memcpy(attr.prog_name, "BEGIN", 6);
    int prog = bpf(BPF_PROG_LOAD, &attr);
    if (prog < 0)
        return fail("BPF_PROG_LOAD");

    /* A raw tracepoint's context is its arguments: BEGIN has none, steadytrace hands 8 zero bytes. */
    uint64_t context = 0;
    memset(&attr, 0, sizeof attr);
    attr.test.prog_fd = prog;
    attr.test.ctx_in = (uint64_t)(uintptr_t)&context;
    attr.test.ctx_size_in = sizeof context;
    if (bpf(BPF_PROG_TEST_RUN, &attr) < 0)
        return fail("BPF_PROG_TEST_RUN");

    long page = sysconf(_SC_PAGESIZE);
    volatile uint64_t *consumer = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, ring, 0);
    uint8_t *producer = mmap(NULL, page + 2 * RING_BYTES, PROT_READ, MAP_SHARED, ring, page);
    if (consumer == MAP_FAILED || producer == MAP_FAILED)
        return fail("mmap of the ring buffer");
    uint64_t consumed = *consumer;
    uint64_t produced = __atomic_load_n((uint64_t *)producer, __ATOMIC_ACQUIRE);
    const uint8_t *data = producer + page;
    int status = 1;
    while (consumed < produced) {
        const uint8_t *header = data + (consumed & (RING_BYTES - 1));
        uint32_t len = __atomic_load_n((const uint32_t *)header, __ATOMIC_ACQUIRE);
        if (len & BPF_RINGBUF_BUSY_BIT)
            break;
        if (!(len & BPF_RINGBUF_DISCARD_BIT)) {
            int32_t id;
            memcpy(&id, header + BPF_RINGBUF_HDR_SZ, sizeof id);
            if (id == RECORD_PRINTF && write(1, "x\n", 2) == 2)
                status = 0;
            if (id == RECORD_EXIT)
                status = 0;
        }
        consumed += (BPF_RINGBUF_HDR_SZ + (len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) + 7) & ~7u;
        __atomic_store_n(consumer, consumed, __ATOMIC_RELEASE);
    }
    if (status != 0)
        return fail("reading the record");
    return 0;
}
