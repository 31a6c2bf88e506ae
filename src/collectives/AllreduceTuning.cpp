// `auto`: the all-reduce algorithm by message size and node layout. Across nodes the cost
// model decides (AllreduceCostModel.cpp; docs/collectives-cost-model.md). The measured
// crossovers below set the rules that remain: one host, and hier's leaders.
//
// Crossovers measured with apps/allreduce_bench on the development machine (2 shared
// cores, AMD EPYC VM, Open MPI 4.1.4) on 2026-11-22:
// - one host (vader shared memory, np 2 and np 4 oversubscribed): recursive
//   halving-doubling (rd) and the ring are within noise of each other at np 2; at np 4 rd
//   is 3-15% faster up to 4 MiB (log2 N rounds against 2(N-1), and every round costs
//   context switches when ranks share cores), the ring ahead from 16 MiB on
//   (e.g. 64 MiB: ring 58-70 ms, rd 63-76 ms, MPI_Allreduce 120-131 ms).
// - several hosts (scripts/mpirun/cluster.sh, 4 namespaces, 1 Gbit/s tbf links): rd is
//   1.5-3x faster than the ring up to 512 KiB (latency-bound, ~1 ms per round on the
//   loaded emulation), level at 1 MiB, and the ring 1.3-1.5x faster from 2 MiB on.
// Hence rd below 4 MiB on one host, the ring above.
// Across hosts the eager-sized network chunks (65408 B) moved the crossover down.
// Re-measured on 2026-11-23 (docs/benchmarks/allreduce-targets.md, section 5; bench lock
// held, load 3-16): at 3 nodes the ring beats rd from 64 KiB on (256 KiB: 7.4 against
// 8.3 ms, 512 KiB: 5.1 against 12.1 ms, MTU 1500); at 2 nodes the two move the same bytes
// and are level from 256 KiB (ring 2.0 / 4.0 / 8.1 ms, rd 2.1 / 4.1 / 9.6 ms at 256 KiB /
// 512 KiB / 1 MiB), rd ahead below (64 KiB: 0.09 against 0.18 ms). Hence the ring from
// 256 KiB across hosts, rd below.
// Re-measured on 2026-11-23 16:05-16:15 UTC on a quiet machine (load 1.6-2.4) with the
// links' tbf burst at 128 KB (the default 512 KB lets any call of up to ~512 KiB that
// follows an idle gap cross at memory speed, which no 1 Gbit NIC does; 128 KB is the
// smallest burst at which a bulk TCP stream still reaches 0.119 GB/s), MTU 1500,
// docs/benchmarks/allreduce-targets.md, "auto". ring against rd, us:
//   2 nodes: 4 KiB 47.8 / 47.7, 32 KiB 254 / 268, 64 KiB 541 / 541, 128 KiB 1057 / 1104
//   3 nodes: 4 KiB 201 / 184, 16 KiB 174 / 225, 32 KiB 288 / 517, 64 KiB 711 / 1059
//   4 nodes: 32 KiB 431 / 335, 64 KiB 765 / 787, 128 KiB 1565 / 1619, 256 KiB 3253 / 3606
// Hence the ring from 64 KiB across hosts (2 and 4 nodes: level or ahead from 32-64 KiB),
// and from 16 KiB when the rank count is not a power of two (3 nodes: rd folds the third
// rank in with two extra rounds and is 1.3-1.8x slower from 16 KiB on). Those two
// thresholds served hier's leaders until hier's network phase went to the cost model too
// (it weighs each slice's collective against the others sharing the link); the record above is what the model's defaults were checked against.
// With several ranks on a node, hier sends each vector over a node's link once instead of
// once per rank (docs/benchmarks/allreduce-emulated-cluster.txt); the cost model weighs it
// against the flat algorithms (docs/collectives-cost-model.md).
#include "collectives/AllreduceTuning.h"

namespace ringtrain {

ModelLayout model_layout(const NodeLayout& layout, const AllreduceTuning& tuning) {
  ModelLayout where;
  if (layout.nodes > 0 && layout.min_ranks_per_node == layout.max_ranks_per_node &&
      layout.ranks == layout.nodes * layout.min_ranks_per_node)
    where.ranks_per_node = layout.min_ranks_per_node;
  where.chunk_bytes = tuning.ring_chunk_bytes_network;
  where.rab_send_window = tuning.rab_send_window;
  return where;
}

int plan_rab_lanes(std::size_t bytes, const NodeLayout& layout, Compression compression, const AllreduceTuning& tuning,
                   const AllreduceCostModel& model) {
  if (tuning.rab_lanes > 0) return tuning.rab_lanes;
  if (layout.nodes <= 1) return 1;
  return choose_rab_lanes(bytes, layout.ranks, compression, model, model_layout(layout, tuning));
}

void force_rab_lanes(AllreducePlan& plan, std::size_t bytes, const NodeLayout& layout, Compression compression,
                     const AllreduceTuning& tuning, const AllreduceCostModel& model) {
  if (tuning.rab_lanes <= 0 || plan.rab_lanes == tuning.rab_lanes) return;
  plan.rab_lanes = tuning.rab_lanes;
  const ModelLayout where = model_layout(layout, tuning);
  const bool modelled = rab_lanes_modelled(where, tuning.rab_lanes);
  for (auto it = plan.predicted_s.begin(); it != plan.predicted_s.end(); ++it) {
    if (it->first != AllreduceAlgo::kRabenseifner) continue;
    if (modelled) it->second = predict_rab_seconds(bytes, layout.ranks, compression, model, where, plan.rab_lanes);
    else plan.predicted_s.erase(it);
    return;
  }
}

AllreducePlan plan_auto_allreduce(std::size_t bytes, const NodeLayout& layout,
                                  Compression compression, const AllreduceTuning& tuning,
                                  const AllreduceCostModel& model) {
  AllreducePlan plan;
  if (layout.ranks <= 1) {
    plan.basis = "one rank";
    return plan;
  }
  if (layout.nodes == 1) {
    const bool rd = compression == Compression::kNone && bytes < tuning.auto_ring_min_bytes_single_host;
    plan.algo = rd ? AllreduceAlgo::kRecursiveDoubling : AllreduceAlgo::kRing;
    plan.basis = "one host, measured crossover, not modelled";
    return plan;
  }
  const ModelLayout where = model_layout(layout, tuning);
  AllreducePlan plan_by_model =
      choose_by_cost_model(bytes, layout.ranks, compression, tuning.rd_doubling_max_bytes, model, where);
  if (layout.nodes_with_several_ranks > 0) {
    // hier last: the ring and rd keep a near-tie (their record is longer).
    const double hier =
        predict_hier_seconds(bytes, layout.nodes, layout.min_ranks_per_node, layout.max_ranks_per_node,
                             compression, tuning.rd_doubling_max_bytes, model, tuning.ring_chunk_bytes_network);
    plan_by_model.predicted_s.emplace_back(AllreduceAlgo::kHierarchical, hier);
    choose_within_margin(plan_by_model, model.choice_margin);
    // rab only when it leads hier by more than hier_margin: at 4x2 and 2x4 emulated nodes the
    // model put rab 0.2-6.8% ahead, and measured rab was 1.06-1.27x hier's time in all 12
    // cells of the quiet fidelity run (the model's rab / hier 8-30% low) and slower in 22 of
    // 24 of the re-run (docs/benchmarks/allreduce-sim-fidelity-measured.md).
    if (plan_by_model.algo == AllreduceAlgo::kRabenseifner) {
      for (const auto& [algo, seconds] : plan_by_model.predicted_s)
        if (algo == AllreduceAlgo::kRabenseifner && hier <= seconds * (1 + model.hier_margin))
          plan_by_model.algo = AllreduceAlgo::kHierarchical;
    }
  }
  // Forced lanes last: the choice above was made with the model's lanes.
  force_rab_lanes(plan_by_model, bytes, layout, compression, tuning, model);
  return plan_by_model;
}

}  // namespace ringtrain
