# OpenLake build.
#
#   make            build/openlaked and build/openlake (normal build, -O2)
#   make asan       the same under ASan+UBSan in build/asan/
#   make run        install system packages if missing, build, start openlaked
#   make test       install test deps, build normal + sanitizer, run every test
#   make fuzz       run each libFuzzer target for FUZZ_SECONDS (default 30)
#   make bench      benchmarks (never part of make test)
#   make dist       the pip package openlake-vllm: sdist and manylinux wheel in dist/
#
# One source list per module (every .c in the module's folder). Objects and
# binaries go under $(B); B=build for the normal build, B=build/asan for the
# sanitizer build (make asan sets it, and DEFS: the test-build switches
# OL_ASSERTS (base/assert.h: OL_ASSERT is on) and OL_FAULTS (base/fault.h:
# fault injection at I/O completions), which a normal build never has).

B        ?= build
CC       ?= cc
OPT      ?= -O2
SAN      ?=
DEFS     ?=
# Warnings are errors here; setup.py (a user's pip build of the sdist, with
# whatever compiler they have) passes WERROR= so a new compiler's new
# warning does not fail their install.
WERROR   ?= -Werror
VERSION  := 0.1.0
GIT      := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# Optional transport: UCX, probed once here.
HAVE_UCX := $(shell pkg-config --exists ucx 2>/dev/null && echo 1 || echo 0)
ifeq ($(HAVE_UCX),1)
  UCX_CFLAGS := -DOL_HAVE_UCX=1 $(shell pkg-config --cflags ucx)
  UCX_LIBS   := $(shell pkg-config --libs ucx)
  # The KV client dlopens libucp (src/client/ucx_link.c), so a binary that
  # only uses the client does not need it at start. A sanitizer build loads
  # it at start anyway: LeakSanitizer (GCC 12, glibc 2.36) crashes at exit
  # scanning the thread-local storage of a dlopen'ed libucp.
  ifneq ($(SAN),)
    UCX_LIBS := -Wl,--push-state,--no-as-needed $(UCX_LIBS) -Wl,--pop-state
  endif
endif

CFLAGS_ALL = -std=c17 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -Wshadow \
             -Wno-unused-parameter -g $(OPT) $(SAN) $(DEFS) -fno-omit-frame-pointer \
             -Iinclude -Isrc -Itests/unit $(UCX_CFLAGS) \
             -DOL_VERSION='"$(VERSION)"' -DOL_GIT_COMMIT='"$(GIT)"' \
             -DOL_BUILD_FLAGS='"$(strip $(OPT) $(SAN) $(DEFS))"' $(CFLAGS)
LIBS     = -luring -lisal -lcrypto -lssl -lxxhash -lexpat -lcurl -ljansson -lpthread -lm -ldl $(UCX_LIBS)
LDFLAGS_ALL = $(SAN) $(LDFLAGS)

BASE_SRC   := $(wildcard src/base/*.c)
RT_SRC     := $(wildcard src/rt/*.c)
HTTP_SRC   := $(wildcard src/http/*.c)
KV_SRC     := $(wildcard src/kv/*.c)
STORE_SRC  := $(wildcard src/store/*.c)
S3_SRC     := $(wildcard src/s3/*.c)
CLIENT_SRC := $(wildcard src/client/*.c)
CLUSTER_SRC := $(wildcard src/cluster/*.c)
NET_SRC    := $(wildcard src/net/*.c)
CLIENT_TEST_SRC := $(wildcard tests/client/*.c) tests/unit/runner.c
DAEMON_SRC := $(wildcard src/daemon/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
UNIT_SRC   := $(wildcard tests/unit/*.c)
ALLOC_SRC  := $(wildcard tests/alloc/*.c) tests/unit/runner.c
LIB_SRC    := $(BASE_SRC) $(RT_SRC) $(HTTP_SRC) $(KV_SRC) $(STORE_SRC) $(S3_SRC) $(CLIENT_SRC) \
              $(NET_SRC) $(CLUSTER_SRC)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

.PHONY: all asan run test unit fuzz dist bench bench-http bench-kv bench-vllm bench-store bench-cluster bench-cluster-incast deps test-deps clean FORCE
all: $(B)/openlaked $(B)/openlake $(B)/unit_tests $(B)/client_tests $(if $(SAN),,$(B)/alloc_tests)

# Every object is rebuilt when the flags that change code do (a build dir
# made before DEFS existed must not keep objects without them).
$(B)/obj/%.o: %.c $(B)/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# XXH3 of shard blocks in AVX2 (src/store/xxh3_avx2.c; called only where the CPU has it).
$(B)/obj/src/store/xxh3_avx2.o: CFLAGS += -mavx2

$(B)/libopenlake.a: $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

$(B)/openlaked: $(call obj,$(DAEMON_SRC)) $(B)/libopenlake.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(B)/openlake: $(call obj,$(CLI_SRC)) $(B)/libopenlake.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(B)/unit_tests: $(call obj,$(UNIT_SRC)) $(B)/libopenlake.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# C client tests: run by tests/integration/test_client.py against a daemon.
$(B)/client_tests: $(call obj,$(CLIENT_TEST_SRC)) $(B)/libopenlake.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# Objects that print the version are rebuilt when the git commit changes.
$(B)/commit.stamp: FORCE
	@mkdir -p $(B); echo '$(VERSION) $(GIT) $(OPT) $(SAN) $(DEFS)' | cmp -s - $@ || echo '$(VERSION) $(GIT) $(OPT) $(SAN) $(DEFS)' > $@
$(B)/flags.stamp: FORCE
	@mkdir -p $(B); echo '$(OPT) $(SAN) $(DEFS)' | cmp -s - $@ || echo '$(OPT) $(SAN) $(DEFS)' > $@
$(B)/obj/src/cli/cmd_version.o $(B)/obj/src/daemon/main.o: $(B)/commit.stamp
FORCE:

# Counts heap allocations by interposing malloc: normal build only.
$(B)/alloc_tests: $(call obj,$(ALLOC_SRC)) $(B)/libopenlake.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

asan:
	$(MAKE) B=build/asan OPT=-O1 SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined' \
	    DEFS='-DOL_ASSERTS=1 -DOL_FAULTS=1'

deps:
	@bash scripts/deps.sh run

test-deps:
	@bash scripts/deps.sh test

# ./data: a checkout keeps its data in the tree (base/datadir.h: the
# default data dir is ./data where it exists, else the per-user one).
run: deps
	$(MAKE) all
	mkdir -p data
	./build/openlaked $(ARGS)

test: test-deps
	$(MAKE) all
	$(MAKE) asan
	bash scripts/test.sh

unit: all
	./build/unit_tests

# The sdist and the repaired wheel (scripts/dist.sh; docs/packaging.md).
dist:
	@bash scripts/deps.sh dist
	bash scripts/dist.sh

FUZZ_SECONDS ?= 30
fuzz: test-deps
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

bench: bench-http bench-kv bench-vllm bench-store bench-cluster

bench-http: deps
	bash scripts/deps.sh bench
	$(MAKE) all
	bash bench/http/run.sh

bench-kv: deps
	bash scripts/deps.sh bench
	bash bench/kv/run_core.sh
	bash bench/kv/run_client.sh
	bash bench/kv/run_evict.sh
	bash bench/kv/run_peers.sh
	bash bench/kv/run_disk.sh
	bash bench/kv/run_first_contact.sh
	bash bench/kv/run_ucx.sh

bench-cluster-incast: test-deps
	$(MAKE) all
	bash bench/cluster/run_incast.sh

bench-vllm: deps
	bash bench/vllm/run_ttft.sh

bench-store: deps
	bash scripts/deps.sh bench
	$(MAKE) all
	bash bench/store/run_ec.sh
	bash bench/store/run_md5.sh
	bash bench/store/run_index.sh
	bash bench/store/run_list.sh
	bash bench/store/run_s3.sh

bench-cluster: deps
	bash scripts/deps.sh bench
	bash bench/cluster/run_pool.sh
	bash bench/cluster/run_scale.sh
	$(MAKE) bench-cluster-incast
	SYSTEMS=cold,openlake,openlake-remote LENS=8192,32768 DOC=remote bash bench/vllm/run_ttft.sh

clean:
	rm -rf build
