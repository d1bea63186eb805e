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

struct block {
	uint64_t *insns; /* each instruction's address */
	size_t n_insns;
	uint64_t execs; /* incremented inline by the translated code */
};

/* One instruction's executions, for a snapshot. */
struct insn_count {
	uint64_t vaddr;
	uint64_t execs;
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
}

static int cmp_vaddr(const void *a, const void *b)
{
	const struct insn_count *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* Writes every instruction's executions so far, its blocks' summed. */
static int snapshot(const char *path)
{
	struct insn_count *all;
	size_t n = 0, i, j, cap = 0;
	struct chunk *c;
	FILE *f;

	pthread_mutex_lock(&lock);
	for (c = chunks; c; c = c->next)
		for (i = 0; i < c->used; i++)
			cap += c->blocks[i].n_insns;
	all = malloc((cap ? cap : 1) * sizeof(*all));
	if (!all) {
		pthread_mutex_unlock(&lock);
		return -1;
	}
	for (c = chunks; c; c = c->next) {
		for (i = 0; i < c->used; i++) {
			const struct block *b = &c->blocks[i];
			uint64_t execs = __atomic_load_n(&b->execs, __ATOMIC_RELAXED);

			if (!execs)
				continue;
			for (j = 0; j < b->n_insns && n < cap; j++) {
				all[n].vaddr = b->insns[j];
				all[n].execs = execs;
				n++;
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

		for (; i < n && all[i].vaddr == vaddr; i++)
			sum += all[i].execs;
		fprintf(f, "%llx %llu\n", (unsigned long long)vaddr, (unsigned long long)sum);
	}
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
			if (snapshot(out))
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
