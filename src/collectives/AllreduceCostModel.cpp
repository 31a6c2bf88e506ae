// The alpha-beta-gamma predictions of AllreduceCostModel.h, round by round as the code
// sends (RingAllreduce.cpp, RabenseifnerAllreduce.cpp, HalvingDoublingAllreduce.cpp), and the
// choice auto makes from them. The tuning file is CostModelFile.cpp.
#include "collectives/AllreduceCostModel.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain {
namespace {
// What the formulas need of one call: n fp32 bytes (reduced), w bytes on the wire, p ranks,
// L ranks per node (node by node), `share` collectives sharing each node's link, the
// pipeline chunk on the wire.
struct Call {
  double n = 0, w = 0;
  int p = 1;
  int per_node = 1;
  int share = 1;
  double chunk = 65408;
  double n_per_w() const { return n / w; }
};

int pof2_below(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

// Rounds of rab and rd whose partner (distance mask < intra) shares the node: the largest
// power of two dividing L, when the ranks are not folded (a fold shifts the pairing).
int intra_distance(int per_node, int p, int q) { return q == p ? (per_node & -per_node) : 1; }

// The ring, node by node: 2(p-1) steps of a segment s = w/p in chunks c = min(s, chunk).
// A chunk's path through the steps (the chain) crosses h = ceil(2(p-1)/L) links and
// 2(p-1) - h memory paths and is added (p-1) times; every link and memory path carries
// one segment per step each way, the additions one segment per reduce-scatter step.
double ring_seconds(const Call& c, const AllreduceCostModel& m) {
  const double beta = m.beta_s_per_byte * c.share;
  const double path = c.per_node > 1 ? std::max(beta, m.copy_s_per_byte) : beta;
  const double s = c.w / c.p;
  const double chunk = std::min(s, c.chunk);
  const double steps = 2.0 * (c.p - 1);
  const double h = std::ceil(steps / c.per_node);
  const double chain = h * (m.alpha_s + chunk * beta) + (steps - h) * (m.shm_alpha_s + chunk * m.copy_s_per_byte) +
                       (c.p - 1) * chunk * c.n_per_w() * m.gamma_s_per_byte;
  const double link = (c.p - 1) * (std::max(s * path, s * c.n_per_w() * m.gamma_s_per_byte) + s * path);
  return std::max(chain, link);
}

// One exchange of s wire bytes each way in pipelined chunks, the received ones added
// (reduce) as they arrive: the latency, then the transfer or the additions, whichever is
// slower, plus one chunk of the other.
double exchange_seconds(double s, double latency, double beta, bool reduce, const Call& c,
                        const AllreduceCostModel& m) {
  if (!reduce) return latency + s * beta;
  const double chunk = std::min(s, c.chunk);
  const double g = c.n_per_w() * m.gamma_s_per_byte;
  return latency + std::max(s * beta + chunk * g, chunk * beta + s * g);
}

// rab: the fold, then rounds of w/2, w/4, ..., w/q and back. A round within a node goes
// through memory; across nodes, f = min(L, q) x share flows of a node share its link: the
// first such round waits for all of them (f s beta on top of its own exchange), later ones
// cost the slower of a rank's own exchange and the link's f s beta (the ranks of a node
// drift apart by a transfer each, so one's latency overlaps another's transfer).
double rab_seconds(const Call& c, const AllreduceCostModel& m) {
  const int q = pof2_below(c.p);
  const int intra = intra_distance(c.per_node, c.p, q);
  const double beta = m.beta_s_per_byte;
  const double flows = static_cast<double>(std::min(c.per_node, q)) * c.share;
  double t = 0.0;
  if (q != c.p)  // fold: the whole vector in and the result back, in chunks
    t += exchange_seconds(c.w, m.alpha_s, beta * c.share, true, c, m) +
         exchange_seconds(c.w, m.alpha_s, beta * c.share, false, c, m);
  std::vector<std::pair<double, bool>> rounds;  // (wire bytes, within a node)
  double s = c.w;
  for (int mask = 1; mask < q; mask *= 2) rounds.emplace_back(s /= 2, mask < intra);
  bool first_across = true;
  for (int phase = 0; phase < 2; ++phase) {
    const bool reduce = phase == 0;
    for (std::size_t i = 0; i < rounds.size(); ++i) {
      const auto [bytes, inside] = reduce ? rounds[i] : rounds[rounds.size() - 1 - i];
      if (inside) {
        t += exchange_seconds(bytes, m.shm_alpha_s, m.copy_s_per_byte, reduce, c, m);
        continue;
      }
      const double own = exchange_seconds(bytes, m.alpha_s, beta, reduce, c, m);
      const double others = (flows - 1) * bytes * beta;
      if (flows <= 1) t += own;
      else if (first_across) t += own + others;
      else t += std::max(own, flows * bytes * beta + (reduce ? std::min(bytes, c.chunk) * c.n_per_w() * m.gamma_s_per_byte : 0.0));
      first_across = false;
    }
  }
  return t;
}

// rab in k lanes (one rank per node, one collective per link), played out in the order
// the code runs them (RabenseifnerAllreduce.cpp): every lane's first stage is posted at
// once; then stage by stage, lane by lane, the rank waits for the lane's chunks (each
// arrives alpha after its bytes crossed the link) and adds each as it comes, waits for its
// own sends to leave, and posts the lane's next stage. Every rank does the same (a rank's
// partner's bytes come in on its link as its own go out), so one rank's link and clock
// stand for all. A stage of x bytes per lane costs about the larger of one lane's latency
// and its bytes, and the link's k x bytes: one lane's latency overlaps the others'
// transfers. The fold and unfold are stages of a whole lane. k = 1 gives rab_seconds.
double rab_lanes_seconds(const Call& c, const AllreduceCostModel& m, int lanes) {
  if (lanes == 1) return rab_seconds(c, m);
  const int q = pof2_below(c.p);
  const auto k = static_cast<std::size_t>(lanes);
  const double beta = m.beta_s_per_byte;
  const double g = c.n_per_w() * m.gamma_s_per_byte;
  std::vector<std::pair<double, bool>> stages;  // (wire bytes per lane, reduce)
  const double lane = c.w / lanes;
  std::vector<double> rounds;
  for (double x = lane, mask = 1; mask < q; mask *= 2) rounds.push_back(x /= 2);
  if (q != c.p) stages.emplace_back(lane, true);
  for (double x : rounds) stages.emplace_back(x, true);
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it) stages.emplace_back(*it, false);
  if (q != c.p) stages.emplace_back(lane, false);
  double link = 0.0;   // when the rank's link is free
  double clock = 0.0;  // the rank's own time
  std::vector<double> start(k), sent(k);  // the lane's stage in flight: its bytes start, have left
  const auto post = [&](std::size_t l, double x, double at) {
    start[l] = std::max(at, link);
    link = sent[l] = start[l] + x * beta;
  };
  for (std::size_t l = 0; l < k; ++l) post(l, stages.front().first, 0.0);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto [x, reduce] = stages[s];
    for (std::size_t l = 0; l < k; ++l) {
      const double chunks = std::max(1.0, std::ceil(x / c.chunk));
      for (double i = 1; i <= chunks; ++i) {  // chunk i arrives, then is added
        const double arrived = std::min(i * c.chunk, x);
        clock = std::max(clock, start[l] + arrived * beta + m.alpha_s);
        if (reduce) clock += (arrived - std::min((i - 1) * c.chunk, x)) * g;
      }
      clock = std::max(clock, sent[l]);
      if (s + 1 < stages.size()) post(l, stages[s + 1].first, clock);
    }
  }
  return clock;
}

// rd: whole messages. A message of b bytes across nodes costs alpha + b beta f eagerly, or
// 3 alpha + b rendezvous_beta f above the eager limit (request, clear to send, data), with
// f = L x share flows on the link; within a node shm_alpha + b copy.
double rd_seconds(const Call& c, std::size_t doubling_max_bytes, const AllreduceCostModel& m) {
  const int q = pof2_below(c.p);
  const int intra = intra_distance(c.per_node, c.p, q);
  const double flows = static_cast<double>(c.per_node) * c.share;
  const auto message = [&](double b, bool across) {
    if (!across) return m.shm_alpha_s + b * m.copy_s_per_byte;
    if (b > m.eager_limit_bytes) return 3 * m.alpha_s + b * m.rendezvous_beta_s_per_byte * flows;
    return m.alpha_s + b * m.beta_s_per_byte * flows;
  };
  const double g = m.gamma_s_per_byte;
  double t = q == c.p ? 0.0 : 2 * message(c.n, true) + c.n * g;  // fold
  if (c.n <= static_cast<double>(doubling_max_bytes) || static_cast<std::size_t>(c.n) / 4 < static_cast<std::size_t>(q)) {
    for (int mask = 1; mask < q; mask *= 2) t += message(c.n, mask >= intra) + c.n * g;
    return t;
  }
  double b = c.n;
  for (int mask = q / 2; mask >= 1; mask /= 2) {  // farthest first
    b /= 2;
    t += 2 * message(b, mask >= intra) + b * g;
  }
  return t;
}

}  // namespace

double predict_allreduce_seconds(AllreduceAlgo algo, std::size_t bytes, int ranks,
                                 Compression compression, std::size_t doubling_max_bytes,
                                 const AllreduceCostModel& m, const ModelLayout& layout) {
  if (ranks < 1) throw std::invalid_argument("predict_allreduce_seconds: ranks must be >= 1");
  if (layout.ranks_per_node < 1 || layout.link_share < 1 || layout.chunk_bytes < 1)
    throw std::invalid_argument("predict_allreduce_seconds: ranks per node, link share and chunk must be >= 1");
  if (ranks == 1 || bytes == 0) return 0.0;
  Call c;
  c.n = static_cast<double>(bytes);
  c.w = compression == Compression::kNone ? c.n : c.n / 2;
  c.p = ranks;
  c.per_node = layout.ranks_per_node;
  c.share = layout.link_share;
  c.chunk = static_cast<double>(layout.chunk_bytes);
  switch (algo) {
    case AllreduceAlgo::kRing: return ring_seconds(c, m);
    case AllreduceAlgo::kRabenseifner: return rab_seconds(c, m);
    case AllreduceAlgo::kRecursiveDoubling:
      if (compression != Compression::kNone)
        throw std::invalid_argument("predict_allreduce_seconds: rd moves fp32 only");
      return rd_seconds(c, doubling_max_bytes, m);
    default:
      break;
  }
  throw std::invalid_argument("predict_allreduce_seconds: no model for '" +
                              std::string(allreduce_algo_name(algo)) + "' (ring, rab, rd)");
}

bool rab_lanes_modelled(const ModelLayout& layout, int lanes) {
  return lanes == 1 || (layout.ranks_per_node == 1 && layout.link_share == 1);
}

double predict_rab_seconds(std::size_t bytes, int ranks, Compression compression, const AllreduceCostModel& m,
                           const ModelLayout& layout, int lanes) {
  if (lanes < 1) throw std::invalid_argument("predict_rab_seconds: lanes must be >= 1");
  if (!rab_lanes_modelled(layout, lanes))
    throw std::invalid_argument("predict_rab_seconds: lanes are modelled for one rank per node, one collective per link");
  if (lanes == 1 || ranks == 1 || bytes == 0)
    return predict_allreduce_seconds(AllreduceAlgo::kRabenseifner, bytes, ranks, compression, 0, m, layout);
  Call c;
  c.n = static_cast<double>(bytes);
  c.w = compression == Compression::kNone ? c.n : c.n / 2;
  c.p = ranks;
  c.chunk = static_cast<double>(layout.chunk_bytes);
  return rab_lanes_seconds(c, m, lanes);
}

int choose_rab_lanes(std::size_t bytes, int ranks, Compression compression, const AllreduceCostModel& model,
                     const ModelLayout& layout) {
  if (ranks <= 1 || layout.ranks_per_node != 1 || layout.link_share != 1) return 1;
  // A lane's largest exchange (the fold's whole lane, else half of it) must
  // - hold at least one whole chunk: smaller lanes send k messages where one lane sends
  //   one in every round, and alpha, as calibrated, is a round's latency *and* its
  //   per-message overhead (system calls, the cores), which lanes multiply and do not
  //   overlap while the model's lanes would (without this rule the model puts 16 lanes
  //   13-40% ahead of one at 4-64 KiB on the 2-4 node record's 1 Gbit/s links, where no
  //   measurement exists);
  // - fit in rab's send window: past it, a lane's remaining chunks go only once the rank
  //   has come round to that lane, and the link idles meanwhile (the replay at 128 ranks,
  //   16 MiB, 100 Gbit/s: 4 lanes 4.56 ms with the window of 16 chunks, 3.61 ms without,
  //   3.74 ms in one lane).
  const double wire = compression == Compression::kNone ? static_cast<double>(bytes) : bytes / 2.0;
  const bool folds = (ranks & (ranks - 1)) != 0;
  const auto chunk = static_cast<double>(layout.chunk_bytes);
  const auto fits = [&](int lanes) {
    const double largest = wire / lanes / (folds ? 1 : 2);
    if (largest < chunk) return false;
    return layout.rab_send_window == 0 || std::ceil(largest / chunk) <= static_cast<double>(layout.rab_send_window);
  };
  // Lanes must lead one lane by more than lanes_margin; then the fastest count (the
  // fewest on a tie). Not the fewest within choice_margin: where lanes straddle two stages
  // the model is optimistic for few lanes (it lets a rank's outgoing and incoming link free
  // up together; 128 ranks, 4 MiB, 100 Gbit/s: 4 lanes predicted 1184 us, replayed 1296 us;
  // 16 lanes 1140 against 1166).
  int best = 1;
  double fastest = predict_rab_seconds(bytes, ranks, compression, model, layout, 1);
  const double one_lane = fastest;
  for (int lanes = 2; lanes <= kMaxModelRabLanes; lanes *= 2) {
    if (!fits(lanes)) continue;
    const double seconds = predict_rab_seconds(bytes, ranks, compression, model, layout, lanes);
    if (seconds < fastest) best = lanes, fastest = seconds;
  }
  return one_lane > fastest * (1 + model.lanes_margin) ? best : 1;
}

AllreducePlan choose_by_cost_model(std::size_t bytes, int ranks, Compression compression,
                                   std::size_t doubling_max_bytes, const AllreduceCostModel& model,
                                   const ModelLayout& layout) {
  // The order of preference on near-ties: the ring (the default, measured at every size and
  // node count), rd (measured below 4 MiB), rab (measured at 2 nodes only).
  AllreducePlan plan;
  plan.basis = "cost model";
  plan.rab_lanes = choose_rab_lanes(bytes, ranks, compression, model, layout);
  for (const AllreduceAlgo algo : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                                   AllreduceAlgo::kRabenseifner}) {
    if (algo == AllreduceAlgo::kRecursiveDoubling && compression != Compression::kNone) continue;
    plan.predicted_s.emplace_back(
        algo, algo == AllreduceAlgo::kRabenseifner
                  ? predict_rab_seconds(bytes, ranks, compression, model, layout, plan.rab_lanes)
                  : predict_allreduce_seconds(algo, bytes, ranks, compression, doubling_max_bytes, model, layout));
  }
  choose_within_margin(plan, model.choice_margin);
  return plan;
}

void choose_within_margin(AllreducePlan& plan, double margin) {
  if (plan.predicted_s.empty()) return;
  double fastest = plan.predicted_s.front().second;
  for (const auto& [algo, seconds] : plan.predicted_s) fastest = std::min(fastest, seconds);
  for (const auto& [algo, seconds] : plan.predicted_s) {
    if (seconds <= fastest * (1 + margin)) {
      plan.algo = algo;
      return;
    }
  }
}

AllreducePlan plan_hier_network(std::size_t slice_bytes, int nodes, int slices, Compression compression,
                                std::size_t doubling_max_bytes, const AllreduceCostModel& model,
                                std::size_t chunk_bytes) {
  if (nodes <= 1) return AllreducePlan{AllreduceAlgo::kRing, "cost model", {{AllreduceAlgo::kRing, 0.0}}};
  ModelLayout shared;  // one owner per node in each collective, `slices` of them on the link
  shared.link_share = slices;
  shared.chunk_bytes = chunk_bytes;
  return choose_by_cost_model(slice_bytes, nodes, compression, doubling_max_bytes, model, shared);
}

double predict_hier_seconds(std::size_t bytes, int nodes, int slices, int max_ranks_per_node,
                            Compression compression, std::size_t doubling_max_bytes,
                            const AllreduceCostModel& m, std::size_t chunk_bytes) {
  if (slices < 1 || max_ranks_per_node < slices)
    throw std::invalid_argument("predict_hier_seconds: need 1 <= slices <= max_ranks_per_node");
  const std::size_t floats = bytes / sizeof(float);
  const std::size_t slice = (floats + static_cast<std::size_t>(slices) - 1) / static_cast<std::size_t>(slices) *
                            sizeof(float);
  const AllreducePlan network = plan_hier_network(slice, nodes, slices, compression, doubling_max_bytes, m, chunk_bytes);
  double t = 0.0;
  for (const auto& [algo, seconds] : network.predicted_s)
    if (algo == network.algo) t = seconds;
  if (max_ranks_per_node == 1) return t;
  const double n = static_cast<double>(bytes);
  return t + 2 * n * m.copy_s_per_byte + (max_ranks_per_node - 1) * static_cast<double>(slice) * m.gamma_s_per_byte;
}

}  // namespace ringtrain
