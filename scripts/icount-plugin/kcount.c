// SPDX-License-Identifier: GPL-2.0
/*
 * kcount: a QEMU TCG plugin that counts the guest kernel's executed
 * instructions, each instruction's executions, for scripts/bench-icount.
 *
 * Every translation block that starts in the kernel's half of the address
 * space gets an inline counter of its executions; each of its instructions
 * ran that many times, exactly (blocks run whole under -icount, which sizes
 * them to the instruction budget before they start), where a sampled
 * profile weighs each sample. The guest asks for a snapshot by creating
 * "kcount-NAME.req" in the VM's results directory (dir=, a 9p share): a
 * thread here polls for it, writes the cumulative counts to
 * "kcount-NAME.txt" ("vaddr executions" per instruction, hexadecimal
 * address; an instruction in several blocks, or translated more than once,
 * summed), then renames the request to "kcount-NAME.done", which the guest
 * waits for. The difference of two snapshots is what ran between them
 * (scripts/guest/kcount-diff.py resolves it with the guest's
 * /proc/kallsyms).
 *
 * Stages: each execution is also attributed to the transport stage whose
 * entry point is on the call stack, if any. The guest names the entry
 * points by creating "kcount-stages-NAME.req" holding "hexaddr stage" lines
 * (stage 1 to MAX_STAGES - 1; the plugin knows no names), which replace
 * the previous table. QEMU 7.2's plugin API reads no registers, and its
 * memory callbacks miss most ret instructions' loads, so the plugin keeps
 * a shadow call stack per kernel stack (a THREAD_SIZE-aligned window of
 * addresses) from the kernel's call instructions alone: a call's store of
 * its return address pushes a frame (the slot it stored to, the return
 * address) on the stack it stored on, which becomes the current one; a
 * frame is popped when a block starts at its return address while its
 * stack is the current one, or when a later call (or a reported ret) uses
 * its slot or one above it. Executing an entry point's first block marks
 * the innermost frame with the stage: the call that led there, or after a
 * tail call (sunrpc's svc_send and svc_encode_result_payload jump to the
 * transport) the caller's frame, which the callee returns from. Frames
 * pushed inside inherit the stage; every kernel block executed while the
 * current stack's innermost frame has one counts to it. Another task's
 * stack, the IRQ stack (interrupts, softirqs) and an IST stack are other
 * windows: their blocks count to no stage unless one of their own entry
 * points is on them. The "# stages" line of each snapshot counts the
 * entries, those with no frame to mark (unplaced), the calls not pushed
 * for depth (overflow), the stacks dropped from a full table (collisions),
 * and the calls and rets seen.
 *
 * A snapshot's lines are "vaddr executions" per instruction, then
 * "vaddr executions stage" for the executions counted to each stage, and
 * one "# stages ..." line of the counters above.
 *
 * Arguments: dir=RESULTS_DIR (required); stages=0 leaves out the stage
 * attribution and the trigger, i.e. the callbacks on every kernel block and
 * call (the plain counts run faster without them).
 *
 * Built by scripts/bench-icount with the host's gcc. The plugin API is
 * QEMU's stable C ABI (version 1 in QEMU 7.2); its few declarations are
 * written out below, as QEMU's header is not packaged on Debian 12.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- QEMU plugin API (include/qemu/qemu-plugin.h, version 1) ---- */
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb_t)(qemu_plugin_id_t id, void *userdata);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef uint32_t qemu_plugin_meminfo_t;
typedef void (*vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
			      uint64_t vaddr, void *userdata);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, vcpu_udata_cb_t cb,
						 enum qemu_plugin_cb_flags flags, void *userdata);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, vcpu_mem_cb_t cb,
					     enum qemu_plugin_cb_flags flags,
					     enum qemu_plugin_mem_rw rw, void *userdata);
extern const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
							size_t idx);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
						     enum qemu_plugin_op op,
						     void *ptr, uint64_t imm);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb_t cb,
					   void *userdata);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* ---- the counters ---- */
/* The kernel's half: the kernel image and the modules. */
#define KERNEL_START 0xffff800000000000ULL

#define MAX_STAGES 64

struct block {
	uint64_t *insns; /* each instruction's address */
	size_t n_insns;
	uint64_t execs; /* incremented inline by the translated code */
	/* executions counted to each stage, allocated at the first */
	uint64_t *stage_execs;
	uint32_t gen; /* of the stage table entry_stage was looked up in */
	int entry_stage; /* the stage this block enters, or 0 */
};

/* One instruction's executions (of one stage, or all: stage 0), for a snapshot. */
struct insn_count {
	uint64_t vaddr;
	uint64_t execs;
	int stage;
};

/*
 * Blocks live in chunks that never move (the translated code holds a
 * pointer to each counter); the chunk list only grows.
 */
#define CHUNK_BLOCKS 65536
struct chunk {
	struct chunk *next;
	size_t used;
	struct block blocks[CHUNK_BLOCKS];
};

static struct chunk *chunks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char dir[4096];

static struct block *new_block(uint64_t *insns, size_t n_insns)
{
	struct block *b;

	pthread_mutex_lock(&lock);
	if (!chunks || chunks->used == CHUNK_BLOCKS) {
		struct chunk *c = calloc(1, sizeof(*c));

		if (!c) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		c->next = chunks;
		chunks = c;
	}
	b = &chunks->blocks[chunks->used];
	b->insns = insns;
	b->n_insns = n_insns;
	chunks->used++; /* the snapshot reads it under the lock too */
	pthread_mutex_unlock(&lock);
	return b;
}


/* ---- stages ---- */
/* The kernel's stacks: THREAD_SIZE (16 KiB without KASAN) aligned. */
#define STACK_SHIFT 14
#define NSTACKS_BITS 13
#define NSTACKS (1 << NSTACKS_BITS)
#define PROBES 32
#define MAX_DEPTH 96

struct stage_table {
	size_t n;
	uint64_t *addrs; /* sorted */
	int *stages;
};

/* A call not known to have returned: the shadow call stack's entries. */
struct frame {
	uint64_t slot; /* where the call stored its return address */
	uint64_t ret; /* the return address */
	int stage; /* the stage open in this frame: its own, or its caller's */
};

struct kstack {
	uint64_t win; /* address >> STACK_SHIFT */
	int depth;
	struct frame f[MAX_DEPTH];
};

/*
 * A table line with stage -1 names the trigger: executing it takes a
 * snapshot there and then, in the vCPU thread, named by the first line of
 * "kcount-next" in `dir` (which it removes). The guest writes the name,
 * then runs the trigger (bench-icount.sh: a write to
 * /proc/sys/kernel/tainted runs proc_taint): no polling, so the snapshot
 * falls on a known instruction, without the guest's wait for an answer.
 */
#define TRIGGER MAX_STAGES

static int stages_on = 1;
static struct stage_table *table;
static uint32_t table_gen = 1;
/* The vCPU thread's state (one vCPU: -icount runs a single one). */
static struct kstack stacks[NSTACKS];
static struct kstack *cur; /* the stack of the last call, or NULL */
static uint64_t cur_win;
static uint64_t n_entries, n_unplaced, n_overflow, n_collisions, n_calls, n_rets;

static int table_lookup(const struct stage_table *t, uint64_t addr)
{
	size_t lo = 0, hi = t ? t->n : 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->addrs[mid] == addr)
			return t->stages[mid];
		if (t->addrs[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Makes the stack holding `addr` the current one. */
static void switch_to(uint64_t addr)
{
	uint64_t win = addr >> STACK_SHIFT, h;
	struct kstack *k;
	int i;

	if (cur && win == cur_win)
		return;
	cur_win = win;
	/* open addressing: a stack keeps its entry (a dead task's too) */
	for (i = 0, h = (win * 0x9e3779b97f4a7c15ULL) >> (64 - NSTACKS_BITS); i < PROBES; i++) {
		k = &stacks[(h + i) % NSTACKS];
		if (k->win == win)
			goto found;
		if (!k->win)
			break;
	}
	if (i == PROBES) {
		/* full around here: the first one's frames are dropped */
		k = &stacks[h];
		n_collisions++;
	}
	k->depth = 0;
	k->win = win;
found:
	cur = k;
}

/* The frames of cur that returned: those at or below a slot now in use. */
static void drop_returned(uint64_t vaddr)
{
	while (cur->depth && cur->f[cur->depth - 1].slot <= vaddr)
		cur->depth--;
}

/*
 * A call's store of its return address (ud: the return address): a frame
 * on the shadow call stack of the stack it stored on, after dropping the
 * frames this store shows to have returned.
 */
static void on_call(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
	struct frame *f;

	(void)vcpu; (void)info;
	if (vaddr < KERNEL_START)
		return;
	n_calls++;
	switch_to(vaddr);
	drop_returned(vaddr);
	if (cur->depth == MAX_DEPTH) {
		n_overflow++;
		return;
	}
	f = &cur->f[cur->depth];
	f->slot = vaddr;
	f->ret = (uint64_t)(uintptr_t)ud;
	f->stage = cur->depth ? cur->f[cur->depth - 1].stage : 0;
	cur->depth++;
}

/* A ret's load of its return address, when QEMU 7.2 reports it (rarely). */
static void on_ret(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
	(void)vcpu; (void)info; (void)ud;
	if (vaddr < KERNEL_START)
		return;
	n_rets++;
	switch_to(vaddr);
	drop_returned(vaddr);
}

static int snapshot(const char *path);

static void trigger_snapshot(void)
{
	char next[8192], name[256], out[8192];
	FILE *f;
	size_t i;

	snprintf(next, sizeof(next), "%s/kcount-next", dir);
	f = fopen(next, "r");
	if (!f)
		return;
	if (!fgets(name, sizeof(name), f))
		name[0] = 0;
	fclose(f);
	unlink(next);
	for (i = 0; name[i]; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == '_' ||
		      name[i] == '.'))
			break;
	name[i] = 0;
	if (!i)
		return;
	snprintf(out, sizeof(out), "%s/kcount-%s.txt", dir, name);
	if (snapshot(out))
		fprintf(stderr, "kcount: cannot write %s\n", out);
}

/* Every kernel block: returns, stage entries, and the count to the stage. */
static void on_exec(unsigned int vcpu, void *ud)
{
	struct block *b = ud;
	uint32_t gen = __atomic_load_n(&table_gen, __ATOMIC_ACQUIRE);
	int stage;

	(void)vcpu;
	if (!cur)
		return;
	/* a block at the innermost frame's return address: it returned */
	while (cur->depth && cur->f[cur->depth - 1].ret == b->insns[0])
		cur->depth--;
	if (b->gen != gen) {
		b->entry_stage = table_lookup(__atomic_load_n(&table, __ATOMIC_ACQUIRE), b->insns[0]);
		b->gen = gen;
	}
	if (b->entry_stage == TRIGGER) {
		trigger_snapshot();
	} else if (b->entry_stage) {
		/*
		 * The innermost frame is the call that led here, or, after a
		 * tail call, the caller's own: the stage's, either way. A stage
		 * entered inside itself stays one.
		 */
		n_entries++;
		if (cur->depth)
			cur->f[cur->depth - 1].stage = b->entry_stage;
		else
			n_unplaced++;
	}
	stage = cur->depth ? cur->f[cur->depth - 1].stage : 0;
	if (stage) {
		uint64_t *st = b->stage_execs;

		if (!st) {
			st = calloc(MAX_STAGES, sizeof(*st));
			if (!st)
				return;
			__atomic_store_n(&b->stage_execs, st, __ATOMIC_RELEASE);
		}
		st[stage]++;
	}
}

/* Whether an x86 instruction is a near call (1) or a near ret (2). */
static int call_or_ret(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0x2e || p[i] == 0x3e ||
			 p[i] == 0x26 || p[i] == 0x64 || p[i] == 0x65 || p[i] == 0x36 ||
			 p[i] == 0xf2 || p[i] == 0xf3))
		i++;
	if (i < n && (p[i] & 0xf0) == 0x40) /* REX */
		i++;
	if (i >= n)
		return 0;
	if (p[i] == 0xe8)
		return 1;
	if (p[i] == 0xff && i + 1 < n && ((p[i + 1] >> 3) & 7) == 2)
		return 1;
	if (p[i] == 0xc3 || p[i] == 0xc2)
		return 2;
	return 0;
}

/* Reads a stage table request: "hexaddr stage" lines. */
static void load_stages(const char *path)
{
	struct stage_table *t = calloc(1, sizeof(*t));
	size_t cap = 0;
	unsigned long long a;
	int st;
	FILE *f = fopen(path, "r");

	if (!t || !f) {
		fprintf(stderr, "kcount: cannot read %s\n", path);
		free(t);
		if (f)
			fclose(f);
		return;
	}
	while (fscanf(f, "%llx %d", &a, &st) == 2) {
		if (st == -1)
			st = TRIGGER;
		else if (st <= 0 || st >= MAX_STAGES)
			continue;
		if (t->n == cap) {
			cap = cap ? 2 * cap : 64;
			t->addrs = realloc(t->addrs, cap * sizeof(*t->addrs));
			t->stages = realloc(t->stages, cap * sizeof(*t->stages));
			if (!t->addrs || !t->stages)
				break;
		}
		t->addrs[t->n] = a;
		t->stages[t->n] = st;
		t->n++;
	}
	fclose(f);
	/* insertion sort: a few dozen entries */
	for (size_t i = 1; i < t->n; i++)
		for (size_t j = i; j > 0 && t->addrs[j - 1] > t->addrs[j]; j--) {
			uint64_t x = t->addrs[j];
			int y = t->stages[j];

			t->addrs[j] = t->addrs[j - 1];
			t->stages[j] = t->stages[j - 1];
			t->addrs[j - 1] = x;
			t->stages[j - 1] = y;
		}
	/* The old table is left allocated: the vCPU may be reading it. */
	__atomic_store_n(&table, t, __ATOMIC_RELEASE);
	__atomic_add_fetch(&table_gen, 1, __ATOMIC_RELEASE);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t i, n = qemu_plugin_tb_n_insns(tb);
	uint64_t *insns;
	struct block *b;

	(void)id;
	if (qemu_plugin_tb_vaddr(tb) < KERNEL_START || !n)
		return;
	insns = malloc(n * sizeof(*insns));
	if (!insns)
		return;
	for (i = 0; i < n; i++)
		insns[i] = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
	b = new_block(insns, n);
	if (!b) {
		free(insns);
		return;
	}
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
	if (!stages_on)
		return;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		switch (call_or_ret(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))) {
		case 1:
			qemu_plugin_register_vcpu_mem_cb(insn, on_call, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_W,
							 (void *)(uintptr_t)(qemu_plugin_insn_vaddr(insn) +
									     qemu_plugin_insn_size(insn)));
			break;
		case 2:
			qemu_plugin_register_vcpu_mem_cb(insn, on_ret, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_R, NULL);
			break;
		}
	}
}

static int cmp_vaddr(const void *a, const void *b)
{
	const struct insn_count *x = a, *y = b;

	if (x->stage != y->stage)
		return x->stage < y->stage ? -1 : 1;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/*
 * Writes every instruction's executions so far, its blocks' summed, then
 * those counted to each stage ("vaddr executions stage").
 */
static int snapshot(const char *path)
{
	struct insn_count *all;
	size_t n = 0, i, j, cap = 0;
	struct chunk *c;
	FILE *f;
	int s;

	pthread_mutex_lock(&lock);
	for (c = chunks; c; c = c->next)
		for (i = 0; i < c->used; i++) {
			const struct block *b = &c->blocks[i];
			const uint64_t *st = __atomic_load_n(&b->stage_execs, __ATOMIC_ACQUIRE);

			cap += b->n_insns;
			if (st)
				for (s = 1; s < MAX_STAGES; s++)
					if (__atomic_load_n(&st[s], __ATOMIC_RELAXED))
						cap += b->n_insns;
		}
	all = malloc((cap ? cap : 1) * sizeof(*all));
	if (!all) {
		pthread_mutex_unlock(&lock);
		return -1;
	}
	for (c = chunks; c; c = c->next) {
		for (i = 0; i < c->used; i++) {
			const struct block *b = &c->blocks[i];
			uint64_t execs = __atomic_load_n(&b->execs, __ATOMIC_RELAXED);
			const uint64_t *st = __atomic_load_n(&b->stage_execs, __ATOMIC_ACQUIRE);

			if (!execs)
				continue;
			for (j = 0; j < b->n_insns && n < cap; j++) {
				all[n].vaddr = b->insns[j];
				all[n].execs = execs;
				all[n].stage = 0;
				n++;
			}
			if (!st)
				continue;
			for (s = 1; s < MAX_STAGES; s++) {
				uint64_t e = __atomic_load_n(&st[s], __ATOMIC_RELAXED);

				for (j = 0; e && j < b->n_insns && n < cap; j++) {
					all[n].vaddr = b->insns[j];
					all[n].execs = e;
					all[n].stage = s;
					n++;
				}
			}
		}
	}
	pthread_mutex_unlock(&lock);
	qsort(all, n, sizeof(*all), cmp_vaddr);
	f = fopen(path, "w");
	if (!f) {
		free(all);
		return -1;
	}
	for (i = 0; i < n;) {
		uint64_t vaddr = all[i].vaddr, sum = 0;

		s = all[i].stage;
		for (; i < n && all[i].vaddr == vaddr && all[i].stage == s; i++)
			sum += all[i].execs;
		if (s)
			fprintf(f, "%llx %llu %d\n", (unsigned long long)vaddr, (unsigned long long)sum, s);
		else
			fprintf(f, "%llx %llu\n", (unsigned long long)vaddr, (unsigned long long)sum);
	}
	fprintf(f, "# stages entries=%llu unplaced=%llu overflow=%llu collisions=%llu "
		"calls=%llu rets=%llu\n",
		(unsigned long long)n_entries, (unsigned long long)n_unplaced,
		(unsigned long long)n_overflow, (unsigned long long)n_collisions,
		(unsigned long long)n_calls, (unsigned long long)n_rets);
	free(all);
	return fclose(f);
}

/* Answers the guest's snapshot requests (kcount-NAME.req) in `dir`. */
static void *poll_requests(void *arg)
{
	(void)arg;
	for (;;) {
		DIR *d = opendir(dir);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			size_t len = strlen(e->d_name);
			char req[8192], out[8192], done[8192];

			if (strncmp(e->d_name, "kcount-", 7) || len < 12 ||
			    strcmp(e->d_name + len - 4, ".req"))
				continue;
			snprintf(req, sizeof(req), "%s/%s", dir, e->d_name);
			snprintf(out, sizeof(out), "%s/%.*s.txt", dir, (int)(len - 4), e->d_name);
			snprintf(done, sizeof(done), "%s/%.*s.done", dir, (int)(len - 4), e->d_name);
			if (!strncmp(e->d_name, "kcount-stages", 13))
				load_stages(req);
			else if (snapshot(out))
				fprintf(stderr, "kcount: cannot write %s\n", out);
			rename(req, done);
		}
		if (d)
			closedir(d);
		usleep(20000);
	}
	return NULL;
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	char path[8192];

	(void)id;
	(void)userdata;
	snprintf(path, sizeof(path), "%s/kcount-exit.txt", dir);
	snapshot(path);
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv)
{
	pthread_t thread;
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "dir=", 4))
			snprintf(dir, sizeof(dir), "%s", argv[i] + 4);
		else if (!strcmp(argv[i], "stages=0"))
			stages_on = 0;
	if (!dir[0]) {
		fprintf(stderr, "kcount: dir=RESULTS_DIR is required\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	if (pthread_create(&thread, NULL, poll_requests, NULL))
		return -1;
	pthread_detach(thread);
	return 0;
}
