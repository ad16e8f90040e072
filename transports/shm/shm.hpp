// The shared-memory transport: the ranks of one node, each in its own
// process, exchange messages through single-producer single-consumer rings
// of fixed-size cells in one POSIX shared-memory segment. Small messages
// travel in one cell; larger ones in chunks, one per cell, so that sender and
// receiver copy at the same time; the largest are read by the receiver
// straight out of the sender's memory (cross-memory attach, process_vm_readv)
// when the kernel allows it. A message whose buffer was allocated through
// tutti (core/shared_memory.hpp) is copied by the receiver straight out of
// its own mapping of that buffer, at memcpy speed. A receive whose observer
// takes pieces (landing_observer::take: a reduction that combines what
// arrives) gets the chunks straight from their cells, or the message from
// that mapping, instead of a copy in its buffer. The transport is polled: a
// progress engine calls progress() and, when idle, await_activity(), which
// sleeps on a futex "doorbell" that senders ring only when the receiver said
// it sleeps.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "bootstrap/bootstrap.hpp"
#include "core/asio.hpp"
#include "core/transport.hpp"

namespace tutti::shm {

struct options {
    // Bytes of one cell, its header included; 0 picks by the number of ranks
    // (32 KiB for a few ranks, down to 4 KiB at 64) so the segment stays small.
    std::size_t cell_bytes = 0;
    // Cells in each ring (one ring per ordered pair of ranks); 0 picks 16,
    // or 8 above 8 ranks.
    std::size_t ring_depth = 0;
    // Messages of at least this many bytes are read by the receiver with
    // process_vm_readv instead of travelling through the rings. Left at 256
    // KiB, it and cma_threshold_awaited_at_end are lowered to 16 KiB where
    // each rank has a core, the setup's line is far (line_ns above
    // shared_copy_far_line_ns) and its copy probe quick (readv_percent at
    // most cells_readv_percent): 2 ranks, 16-64 KiB broadcast, scatter,
    // gather, reduce, scan, exscan 0.52-0.72 of the cells' time there
    // (docs/performance.md, fiftieth session).
    std::size_t cma_threshold = 256 * 1024;
    // The same for a send whose sender awaits it only at the end of its call
    // (transport::isend_awaited_at_end: a fan-out such as a linear
    // all_to_all); 0 picks 32 KiB when the node's ranks outnumber its cores,
    // else 64 KiB (cma_threshold if shared_copy_chunk is 0). Through the
    // cells a message costs two copies, the sender's and the receiver's; read
    // by single copy it costs one, and the wait it adds to the sender holds
    // up no step of its. Where ranks share cores every copy takes a core
    // from another rank, and one copy instead of two wins from 32 KiB
    // (8 ranks, 1 MiB all_to_all: 835 -> 437 us). With a core each, the
    // otherwise idle sender shares that one copy (shared_copy_chunk), which
    // beats the cells' two from 64 KiB (2 ranks, 64 KiB broadcast); but a
    // sender that is itself receiving from its receiver (an exchange) is not
    // idle: such a send takes cma_threshold_exchange instead
    // (docs/performance.md, fifteenth session).
    std::size_t cma_threshold_awaited_at_end = 0;
    // The same for a send awaited at the end to a rank this one is
    // receiving from in the same call (an exchange that ends the call, such
    // as a pairwise all_to_all's last step: a receive of the call from the
    // destination is posted); 0 picks 64 KiB where each rank has a core
    // (32 KiB where lines are far and the copy quick, as for cma_threshold:
    // the 2-rank 64 KiB all_gather and all_to_all 0.85-0.89 of the cells'
    // time, fifty-first session), else cma_threshold. Both ranks are busy
    // then and each reads the other's message: one copy each instead of the
    // cells' two (2 ranks, 128 KiB all_to_all: 11.7 -> 8.2 us). Where ranks
    // share cores, a send awaited at the end takes
    // cma_threshold_awaited_at_end, exchange or not.
    std::size_t cma_threshold_exchange = 0;
    // The same for an exchange whose send a later step of the call waits for
    // (isend: the recursive halving and doubling of an all_reduce, followed
    // by combining). 0 picks, where each rank has a core: where
    // process_vm_readv was measured at most cells_readv_percent of the
    // cells' time, cma_threshold_exchange (one copy each wins there: 2
    // ranks, Intel VM of the fiftieth session, readv_percent 119: the
    // reduce_scatter of 128 KiB-1 MiB took 0.51-0.68 of the cells' time, the
    // all_reduce of 192 KiB-1 MiB 0.72-0.87, the reduce of 1 MiB 0.65, the
    // 128 KiB all_reduce 1.10); where it is slower, no size
    // (cells_readv_percent); where it is unknown, 1 MiB (at least
    // cma_threshold: the sixteenth session's VM, whose probe did not exist
    // yet, took 26.6 us for the 2-rank 128 KiB all_reduce by single copy
    // instead of 19.7, and 72.9 instead of 47.0 at 512 KiB). Where ranks
    // share cores, cma_threshold.
    std::size_t cma_threshold_exchange_between_steps = 0;
    // false: never use cross-memory attach, everything goes through cells.
    bool use_cma = true;
    // Messages of at least this many bytes whose send buffer is shared memory
    // (tutti::allocate_shared) are copied by the receiver out of its mapping
    // of that buffer: one copy at memcpy speed, for the price of an
    // acknowledgement. Below it, the cells are quicker. Where the node's
    // ranks outnumber its cores, a shared buffer is mapped only from the size
    // at which the same send would go by single copy from a private one (for
    // a send awaited at once, cma_threshold): the wait for that
    // acknowledgement costs a sender that has a next step to take.
    std::size_t mapped_threshold = 16 * 1024;
    // false: never map a peer's buffers; shared buffers go as any other.
    bool use_mapped = true;
    // Mappings of a peer's buffers kept for reuse, per peer (mapping costs a
    // page-table fill, so a buffer sent again should not pay it again); the
    // least recently used is dropped beyond this.
    std::size_t max_cached_mappings = 32;
    // A message that announced itself for a single copy but whose receive is
    // not posted after this long is copied into a staging buffer, so that its
    // sender is released (it may be waiting on its own send before posting).
    std::chrono::microseconds stage_unclaimed_after{2000};
    // A message read by single copy (process_vm_readv or a mapping) of at
    // least two chunks of this many bytes is copied by its receiver and its
    // sender together, when the ranks do not outnumber the cores: the
    // receiver takes chunks from the front, while the sender, otherwise idle
    // until the acknowledgement, writes chunks from the back straight into the
    // receive buffer (process_vm_writev) until they meet. Chunks are claimed
    // one at a time, so a sender busy elsewhere delays nothing: the receiver
    // then copies them all. A message read by process_vm_readv and shorter
    // than two chunks is shared in chunks of 32 KiB (if it has two of those:
    // a sent-at-end message from 64 KiB); one read from a mapping is not,
    // its receiver copying at memcpy speed. 0: the receiver always copies
    // alone.
    std::size_t shared_copy_chunk = 128 * 1024;
    // Where a line takes longer than this there and back between the cores
    // (line_ns), a message whose receiver combines it at once
    // (transport::irecv_combined_at_once: a reduction's scratch) is copied
    // by its receiver alone: the chunks its sender would write land in the
    // sender's cache, and the receiver's combining then fetches them line by
    // line (2 ranks, binomial reduce of 512 KiB in this machine's slow mode:
    // 86.8 us shared, 61.4 alone; in the quick mode sharing stays ahead, 55
    // against 59). 0: such messages are shared like any other. Where
    // cells_readv_percent applies, they come through the cells instead.
    // TUTTI_SHM_SHARED_COPY_FAR_LINE_NS=N.
    std::uint32_t shared_copy_far_line_ns = 250;
    // Where process_vm_readv takes more than this percentage of the cells'
    // time (readv_percent), two kinds of message stay in the cells at every
    // size, since both ends copy at once there and the cells' stores stream
    // past the caches (cell_stores adaptive or streaming):
    // - an exchange whose send a later step of the call waits for, unless
    //   cma_threshold_exchange_between_steps is given (2 ranks in this
    //   machine's slow mode, Rabenseifner's all_reduce of 2-16 MiB: 0.52-0.59
    //   of the time);
    // - a message its receiver combines at once (irecv_combined_at_once),
    //   which shared_copy_far_line_ns would have it copy alone: its receiver
    //   answers the sender's offer of a single copy by asking for the cells
    //   (the 2-rank scan of 256 KiB, 4 and 16 MiB: 0.80, 0.89 and 0.65; the
    //   binomial reduce of 512 KiB: 0.76);
    // and private buffers from slow_readv_cells_threshold. This machine's
    // probe reads 267-372 % in its slow mode (benchmarks/line_bounce ~330
    // ns) and 163-182 % in its quick mode (~70 ns), and the rule gained in
    // both (2 ranks, buffers written before every call, 256 KiB to 16 MiB:
    // the cells took 0.40-0.84 of process_vm_readv's time in the slow mode
    // and 0.45-0.85 in the quick one, the 256 KiB broadcast 1.08). So the cells
    // took 0.8-1.5 times what the probe counts for them (docs/performance.md,
    // thirty-ninth to forty-first sessions). Below 150 it leaves single copy
    // to a kernel that copies nearly as fast as the cells: an Intel VM whose
    // probe read 66-132 % (mostly 117-126, either side of the 125 this rule
    // had until the fifty-fourth session) ran 2 ranks' collectives of 256
    // KiB-4 MiB in 0.37-0.84 of the cells' time where buffers are sent
    // unchanged (the scan of 1-4 MiB 1.03-1.05), and at 4 MiB in 0.71-0.88
    // where they are written before every call (1 MiB 0.88-1.03; at 64-256
    // KiB all_gather, gather, broadcast 1.02-1.63 there), and a figure that
    // straddled the rule made those runs bimodal.
    // Until the forty-first session the rule applied where a line took more
    // than 250 ns there and back (line_ns), the proxy it was found by. Not
    // with cached cell stores. Where ranks share cores (since the
    // fifty-eighth session) a receive combined at once still comes through
    // the cells, but a private buffer's message only while it fits in its
    // ring, and with more than two ranks to a core only a one-way one (the
    // endpoint's in_cells_by_the_rule says why); exchanges between steps
    // keep their thresholds. 0: off. Where it
    // applies, capabilities() says slow_single_copy, which the decision
    // trees branch on. TUTTI_SHM_CELLS_READV_PERCENT=N.
    std::uint32_t cells_readv_percent = 150;
    // Where cells_readv_percent applies, a message of at least this many
    // bytes that is not copied out of a mapping (a private buffer) comes
    // through the cells, not by process_vm_readv, whatever the thresholds
    // above say: there both ends copy at once and the cells' stores stream,
    // while process_vm_readv's receiver fetches every line its sender has
    // just written out of the sender's cache. 2 ranks in this
    // machine's slow mode, where each rank writes its buffers before every
    // call (tutti-bench --rewrite, as an application that has just produced
    // its data), 256 KiB to 16 MiB: all_gather, all_to_all, broadcast,
    // gather and scatter 0.40-0.84 of the time (the 4 MiB all_gather 1.02),
    // the all_reduce of 256 KiB 0.69; the scan of 64 KiB took 1.14 times as
    // long. One unchanged buffer sent again and again, its lines still in
    // the receiver's cache from the call before, favours process_vm_readv:
    // there the 4 MiB all_gather took 1.03-1.44 times as long (two runs),
    // the 1 MiB scatter 1.09-1.25, while the broadcast and gather gained
    // (0.51-0.90 from 1 MiB). A shared buffer is still copied out of the
    // receiver's mapping, which took 0.36-0.74 of the cells' time at 2-8
    // MiB. docs/performance.md, fortieth session. 0: off.
    // TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD=N[K|M|G].
    std::size_t slow_readv_cells_threshold = 64 * 1024;
    // Where each rank has a core, a message through the cells of more than
    // one cell's payload and at most four, which its sender is not
    // exchanging with its receiver (no receive of the same call from the
    // receiver posted), goes in pieces of this many bytes: the receiver
    // starts copying after the first piece instead of a whole cell (2 ranks,
    // 32 KiB broadcast: 4.59 -> 4.23 us). In an exchange both ranks copy all
    // the time anyway, and smaller pieces only cost (64 KiB all_gather: 5.33
    // -> 5.68). A message of one cell or less keeps its cell: the segments of
    // a segmented reduce, many in flight, took 1.7 times as long in pieces.
    // 0: messages fill whole cells.
    std::size_t pipeline_piece = 8 * 1024;
    // A receiver waiting for a sender's next cell polls its header line; the
    // payload lines it fetches only after the header says they are written,
    // one crossing after the other. So while it polls, it prefetches as many
    // payload lines as the last message of one cell from that sender had, if
    // that message had at most this many bytes: the lines then come over
    // with the header (2 ranks in this machine's slow mode, a line ~320 ns
    // there and back: 64-byte all_gather 0.81 -> 0.55 us, 128-byte
    // broadcast 0.94 -> 0.65; docs/performance.md, thirty-eighth session).
    // Longer messages were level to slower: the sender is still writing
    // while the receiver's prefetches take its lines away. 0: no prefetch.
    // TUTTI_SHM_PREFETCH_BYTES.
    std::size_t prefetch_bytes = 512;
    // A receiver copies a message of at least this many bytes out of the
    // cells, or out of its mapping of the sender's shared buffer, into its
    // posted receive with stores that bypass the caches
    // (copy_bytes_streaming): a buffer that long leaves the cache before
    // anyone reads it, and an ordinary store first reads every line it
    // writes. 2 ranks, 16 and 64 MiB, this rule on against off (15 rounds,
    // quick mode): all_gather 0.87-0.89, all_to_all 0.91-0.95, broadcast
    // 0.86-0.92, gather 0.88-0.94 of the time; from 4 MiB the 4 MiB
    // broadcast lost (1.25; docs/performance.md, seventy-seventh session).
    // From shared buffers: 0.68-0.93. 4 ranks on 2 cores read level or
    // quicker, and this machine's slow mode level. Messages that arrive
    // before their receive, into a staging buffer, and receives combined at
    // once (a reduction's scratch), which are read again at once, keep
    // ordinary stores. 0: never.
    // TUTTI_SHM_STREAMED_RECEIVE_FROM.
    std::size_t streamed_receive_from = 8 * 1024 * 1024;
    // How a sender writes message bytes into its cells, which its receiver
    // read last. `cached`: ordinary stores, each of which first takes its
    // line back from the receiver's core; quick where lines move between the
    // cores in ~55 ns. `streaming`: stores that bypass the caches
    // (copy_bytes_streaming), 3-4 times as quick from 16 KiB where a line
    // takes ~250 ns (this machine's slow mode; two sockets), up to a quarter
    // slower at 16-32 KiB where lines move quickly. `adaptive`: ordinary
    // stores, one cell in four of at least 4 KiB timed, and one timed cell in
    // 16 written by streaming stores instead, a probe; two timed cells in a
    // row that took more than three times as long per byte as the last probe,
    // and more than 0.1 ns per byte, switch that receiver's cells to
    // streaming stores for the next 1024, after which timing starts again
    // (docs/performance.md, nineteenth and thirty-eighth sessions; the 2-rank
    // 16-128 KiB calls took 0.5-0.8 of the time in this machine's slow mode,
    // the 1 MiB all_reduce 0.42-0.47, and level in its quick mode).
    // TUTTI_SHM_CELL_STORES=adaptive|cached|streaming.
    enum class stores { adaptive, cached, streaming };
    stores cell_stores = stores::adaptive;
    // How a sender writes a message of one line (at most 16 bytes, the cell's
    // header and payload together), which its receiver is polling. `cached`:
    // ordinary stores; the line first goes to the sender's core, then back to
    // the receiver's (two trips). `direct`: one MOVDIR64B, which writes the
    // whole line past both cores' caches, then SFENCE; about 250 ns one way
    // here whatever the mode, so 2-rank 8-byte calls took 0.62-0.88 of the
    // time in the slow mode (a line ~330 ns between the cores) and 2.4-3
    // times as long in the quick one (~75 ns; docs/performance.md,
    // thirty-seventh session). `adaptive`: ordinary stores, one one-line
    // message in 64 timed until it owns its line; two timed over 120 ns in a
    // row switch that receiver's one-line messages to direct stores for the
    // next 4096, after which timing starts again. Where the CPU lacks
    // MOVDIR64B, or ranks outnumber cores (a timed line may then include a
    // preemption), adaptive means cached; so it does where setup's bounce of
    // directly stored lines (beside line_ns's) says they cannot pay
    // (direct_lines_can_pay: on an Intel VM whose line took ~390 ns there and
    // back, ~650 stored directly, adaptive had switched to direct stores and
    // made 8-byte calls 1.3-1.4 times as slow; docs/performance.md,
    // forty-third session). Direct without MOVDIR64B is a tutti::error.
    // TUTTI_SHM_LINE_STORES=adaptive|cached|direct.
    enum class line_stores { adaptive, cached, direct };
    line_stores one_line_stores = line_stores::adaptive;
    // How long a cache line takes there and back between the ranks' cores,
    // in ns (twice what benchmarks/line_bounce reads, whose two transfers
    // overlap): empty, measured at setup where the ranks do not outnumber
    // the cores (rank 0 bounces a line with each other rank in turn, 15-60
    // us a pair, and the slowest pair counts). Selection reads it
    // (transport_capabilities::line_ns): where lines travel far (two
    // sockets; this machine's slow mode, ~450 ns against ~110) algorithms
    // that move each byte between the cores fewer times win. Rank 0's
    // figure, measured or given, is every rank's, so that all ranks choose
    // alike. 0: unknown. TUTTI_SHM_LINE_NS=N gives it.
    std::optional<std::uint32_t> line_ns;
    // How long process_vm_readv takes to read a buffer its owner has just
    // written, as a percentage of the time the cells take for it (the
    // slower of their two copies, which overlap: the owner's into its cells
    // with streaming stores, the reader's out of them). Empty: measured at
    // setup (where the ranks outnumber the cores, by rank 0 alone in its own
    // memory, the same copies and rounds: a round timed against a peer
    // would time the scheduler; it reads below the peer probe, its bytes
    // sitting in its own cache: 168-190 % against 202-219 on the Zen 3 VM),
    // else between rank 0 and the peer whose line took longest, 256 KiB (at most a ring's cells)
    // 24 times, the median of each copy's last 16 counting (until the
    // fifty-first session the quickest of 8, which a lucky round moved
    // across cells_readv_percent in 2 of 55 setups on an Intel VM; the
    // figures of older sessions quoted here were read that way); 3.5-4 ms
    // on that VM, part of it first touches of pages (the cells' pages
    // would fault on their first messages otherwise). Rank 0's figure,
    // measured or given, is every rank's.
    // cells_readv_percent reads it. 0: unknown.
    // TUTTI_SHM_READV_PERCENT=N gives it.
    std::optional<std::uint32_t> readv_percent;
    // How process_vm_readv reads a message whose destination sits 1-63
    // bytes past its source's place in a page. The kernel copies with `rep
    // movsb`, which on the fifty-fifth session's Zen 3 VM ran 4-7 times
    // slower for such a pair (128 KiB in 57-101 us against 13-16 where the
    // destination was 1-31 bytes past), as glibc's memcpy does
    // (tutti::copy_bytes); two heap buffers allocated one after the other
    // are such a pair (16 bytes of malloc's header), in two processes that
    // allocate alike too. bounced: read in pieces of 128 KiB
    // into a buffer placed as the sender's bytes in a page, and
    // copied on from there by copy_bytes (128 KiB in 22 us there; 1 MiB
    // 145 against 454). direct: one read. probe: each rank times a read of
    // its own memory both ways at setup (64 KiB, the quickest of 8, well
    // under a millisecond) and bounces where the misaligned read takes more
    // than 1.5 times the aligned one. Counted in counters::reads_bounced.
    // The same goes for a sender's help (shared_copy_chunk), whose
    // process_vm_writev crawls alike (fifty-seventh session: 128 KiB in 57 us
    // against 13 where the receiver's buffer sat 8-31 bytes past the
    // sender's place): bounced, each chunk is copied to a buffer placed as
    // the receiver's bytes first; counted in counters::writes_bounced.
    // TUTTI_SHM_MISALIGNED_READS=probe|direct|bounced.
    enum class misaligned_reads { probe, direct, bounced };
    misaligned_reads misaligned = misaligned_reads::probe;
    // How often an idle rank checks that its peers are still alive.
    std::chrono::microseconds liveness_interval{5000};
};

// Overrides from the environment, for tuning without a rebuild (a job applies
// them to its options): TUTTI_SHM_CELL_BYTES, TUTTI_SHM_RING_DEPTH,
// TUTTI_SHM_CMA_THRESHOLD, TUTTI_SHM_CMA_THRESHOLD_AT_END,
// TUTTI_SHM_CMA_THRESHOLD_EXCHANGE,
// TUTTI_SHM_CMA_THRESHOLD_EXCHANGE_BETWEEN_STEPS, TUTTI_SHM_MAPPED_THRESHOLD,
// TUTTI_SHM_SHARED_COPY_CHUNK, TUTTI_SHM_PIPELINE_PIECE,
// TUTTI_SHM_PREFETCH_BYTES, TUTTI_SHM_STREAMED_RECEIVE_FROM and
// TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD, each a
// byte count
// such as 16384 or 16K, TUTTI_SHM_CELL_STORES (adaptive, cached or
// streaming), TUTTI_SHM_LINE_NS and TUTTI_SHM_SHARED_COPY_FAR_LINE_NS
// (nanoseconds, digits only), TUTTI_SHM_READV_PERCENT and
// TUTTI_SHM_CELLS_READV_PERCENT (percentages, digits only),
// TUTTI_SHM_MISALIGNED_READS (probe, direct or bounced). Every
// rank of a node must see the same cell size and depth (the segment's layout
// is checked). A value that is not a byte count (or a kind of stores) is a
// tutti::error, and so is a variable of an earlier version
// (TUTTI_SHM_CELLS_FAR_LINE_NS, TUTTI_SHM_CELLS_FAR_THRESHOLD), naming what
// replaced it.
void apply_environment(options& opts);

// How many messages took each path, for tests and tutti-info.
struct counters {
    std::uint64_t eager = 0;   // one cell
    std::uint64_t chunked = 0; // several cells
    std::uint64_t cma = 0;     // sent by single copy (acknowledged)
    std::uint64_t staged = 0;  // received by single copy into a staging buffer
    std::uint64_t mapped = 0;  // sent from shared memory, copied by the receiver (acknowledged)
    std::uint64_t regions_mapped = 0;   // peers' shared regions this rank mapped
    std::uint64_t copies_shared = 0;    // single-copy receives whose sender was asked to help
    std::uint64_t copies_alone_far = 0; // would have been shared, but combined at once (far lines)
    std::uint64_t combined_via_cells = 0; // offered a single copy, asked for the cells (slow readv)
    std::uint64_t chunks_helped = 0;      // chunks this rank wrote into its receivers' buffers
    std::uint64_t message_cells = 0;  // cells written with message bytes (options::pipeline_piece)
    std::uint64_t streamed_cells = 0; // of those, written with streaming stores (cell_stores)
    std::uint64_t streamed_out_cells =
        0; // cells copied out into a posted receive by streaming stores (streamed_receive_from)
    std::uint64_t streamed_mapped_copies = 0; // copies from a mapping into a posted receive by
                                              // streaming stores (streamed_receive_from)
    std::uint64_t direct_lines = 0; // one-line messages written by MOVDIR64B (one_line_stores)
    std::uint64_t prefetch_guesses =
        0;                            // cells read while their lines were guessed (prefetch_bytes)
    std::uint64_t reads_bounced = 0;  // single-copy reads through the bounce buffer (misaligned)
    std::uint64_t writes_bounced = 0; // chunks of help written through it (misaligned)
};

class transport : public tutti::transport {
public:
    virtual shm::counters counters() const noexcept = 0;
    // Whether this rank's messages to `dest` may use cross-memory attach
    // (the startup probe found that dest can read our memory).
    virtual bool cma_to(int dest) const noexcept = 0;
    // The cell size and ring depth in use.
    virtual std::size_t cell_bytes() const noexcept = 0;
    virtual std::size_t ring_depth() const noexcept = 0;
    // options::readv_percent as every rank agreed at setup (0: unknown).
    virtual std::uint32_t readv_percent() const noexcept = 0;
    // Whether this rank reads misaligned messages, and writes its help into
    // misaligned receivers, through its bounce buffer (options::misaligned,
    // as given or probed).
    virtual bool bounces_misaligned_reads() const noexcept = 0;
};

// Whether this CPU writes a line past the caches in one piece (MOVDIR64B),
// which options::line_stores::direct needs.
bool has_direct_line_stores() noexcept;

// Whether one-line messages stored directly can ever beat ordinary stores
// between two cores whose line, bounced at setup, takes line_ns there and
// back, and direct_ns stored directly: only where the direct trip is below
// the ordinary one now, or below the trip at which options::line_stores::
// adaptive's timed lines would switch (direct_lines_pay_below_ns). Where it
// is not, adaptive means cached.
inline constexpr std::uint32_t direct_lines_pay_below_ns = 600;
bool direct_lines_can_pay(std::uint32_t direct_ns, std::uint32_t line_ns) noexcept;

// Every rank of the bootstrap must call this (it is collective) and be on
// this node. Creates, maps and then unlinks "/tutti-<job_id>-shm", so a crash
// after start leaves nothing in /dev/shm.
std::shared_ptr<shm::transport> create_transport(bootstrap& boot, asio::io_context& context,
                                                 options opts = {});

} // namespace tutti::shm
