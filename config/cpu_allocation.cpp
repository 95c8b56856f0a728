#include "config/cpu_allocation.h"

#include <hwloc.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <thread>

#include <fmt/core.h>

#include "config/errc.h"

namespace rill::config {
namespace {

rill::unexpected bad(std::string_view text, const std::string& why) {
  return unexpected(make_error_code(errc::bad_value),
                    fmt::format("'{}': {}; allowed: \"all\", N, \"a..b\", \"numa:auto\" or "
                                "\"numa:nodes=0,1;cores=N;no_ht=true\"",
                                text, why));
}

std::optional<unsigned> number(std::string_view s) {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

std::string describe(const machine_topology& t) {
  if (t.cpus.empty()) {
    return "no CPUs";
  }
  return fmt::format("{} CPUs, OS indexes {}..{}", t.cpus.size(), t.cpus.front().os_index, t.cpus.back().os_index);
}

}  // namespace

machine_topology machine_topology::detect(std::string* note) {
  machine_topology out;
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, static_cast<unsigned>(i));
      cpu_info c;
      c.os_index = pu->os_index;
      hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
      c.core = core != nullptr ? core->logical_index : pu->logical_index;
      hwloc_obj_t p = pu;
      while (p != nullptr && p->memory_arity == 0) {
        p = p->parent;
      }
      c.numa_node =
          (p != nullptr && p->memory_first_child != nullptr) ? static_cast<int>(p->memory_first_child->os_index) : -1;
      out.cpus.push_back(c);
    }
    hwloc_topology_destroy(topo);
  } else if (note != nullptr) {
    *note = "hwloc could not read the topology; assuming one node";
  }
  if (out.cpus.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) {
      out.cpus.push_back(cpu_info{i, i, 0});
    }
  }
  std::sort(out.cpus.begin(), out.cpus.end(),
            [](const cpu_info& a, const cpu_info& b) { return a.os_index < b.os_index; });
  return out;
}

expected<cpu_spec> parse_cpu_allocation(std::string_view text) {
  cpu_spec spec;
  if (text == "all") {
    return spec;
  }
  if (auto n = number(text)) {
    if (*n == 0) {
      return bad(text, "at least one CPU");
    }
    spec.k = cpu_spec::kind::count;
    spec.count = *n;
    return spec;
  }
  if (const auto dots = text.find(".."); dots != std::string_view::npos) {
    auto a = number(text.substr(0, dots));
    auto b = number(text.substr(dots + 2));
    if (!a || !b || *a > *b) {
      return bad(text, "a range needs two CPU numbers, the first not above the second");
    }
    spec.k = cpu_spec::kind::range;
    spec.first = *a;
    spec.last = *b;
    return spec;
  }
  if (text.rfind("numa:", 0) == 0) {
    spec.k = cpu_spec::kind::numa;
    std::string_view rest = text.substr(5);
    if (rest == "auto") {
      return spec;
    }
    if (rest.empty()) {
      return bad(text, "numa: needs \"auto\" or options");
    }
    std::set<std::string> seen;
    while (!rest.empty()) {
      const auto semi = rest.find(';');
      const std::string_view item = rest.substr(0, semi);
      rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos) {
        return bad(text, fmt::format("'{}' is not key=value", item));
      }
      const std::string key(item.substr(0, eq));
      const std::string_view value = item.substr(eq + 1);
      if (!seen.insert(key).second) {
        return bad(text, fmt::format("'{}' given twice", key));
      }
      if (key == "nodes") {
        std::string_view list = value;
        while (!list.empty()) {
          const auto comma = list.find(',');
          auto node = number(list.substr(0, comma));
          if (!node) {
            return bad(text, "nodes must be a comma-separated list of NUMA node numbers");
          }
          spec.nodes.push_back(static_cast<int>(*node));
          list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        }
        if (spec.nodes.empty()) {
          return bad(text, "nodes needs at least one node");
        }
      } else if (key == "cores") {
        auto n = number(value);
        if (!n || *n == 0) {
          return bad(text, "cores must be a positive number");
        }
        spec.cores_per_node = *n;
      } else if (key == "no_ht") {
        if (value != "true" && value != "false") {
          return bad(text, "no_ht must be true or false");
        }
        spec.no_ht = value == "true";
      } else {
        return bad(text, fmt::format("unknown numa option '{}' (nodes, cores, no_ht)", key));
      }
    }
    return spec;
  }
  return bad(text, "not a known form");
}

expected<std::vector<cpu_info>> resolve_cpu_allocation(const cpu_spec& spec, const machine_topology& topo) {
  auto error = [&](const std::string& why) {
    return unexpected(make_error_code(errc::out_of_range), fmt::format("{}; the machine has {}", why, describe(topo)));
  };
  std::vector<cpu_info> out;
  switch (spec.k) {
    case cpu_spec::kind::all:
      return topo.cpus;
    case cpu_spec::kind::count:
      if (spec.count > topo.cpus.size()) {
        return error(fmt::format("{} CPUs requested", spec.count));
      }
      return std::vector<cpu_info>(topo.cpus.begin(), topo.cpus.begin() + spec.count);
    case cpu_spec::kind::range:
      for (unsigned c = spec.first; c <= spec.last; ++c) {
        auto it = std::find_if(topo.cpus.begin(), topo.cpus.end(), [&](const cpu_info& i) { return i.os_index == c; });
        if (it == topo.cpus.end()) {
          return error(fmt::format("CPU {} does not exist", c));
        }
        out.push_back(*it);
      }
      return out;
    case cpu_spec::kind::numa: {
      std::map<int, std::vector<cpu_info>> by_node;
      for (const auto& c : topo.cpus) {
        by_node[c.numa_node].push_back(c);
      }
      std::vector<int> nodes = spec.nodes;
      if (nodes.empty()) {
        for (const auto& [node, cpus] : by_node) {
          nodes.push_back(node);
        }
      }
      for (int node : nodes) {
        auto it = by_node.find(node);
        if (it == by_node.end()) {
          return error(fmt::format("NUMA node {} does not exist", node));
        }
        std::set<unsigned> cores_taken;
        unsigned taken = 0;
        for (const auto& c : it->second) {
          if (spec.cores_per_node && taken == *spec.cores_per_node) {
            break;
          }
          if (spec.no_ht && !cores_taken.insert(c.core).second) {
            continue;  // a second hyperthread of a core already used
          }
          out.push_back(c);
          ++taken;
        }
        if (spec.cores_per_node && taken < *spec.cores_per_node) {
          return error(
              fmt::format("NUMA node {} has only {} usable CPUs, {} requested", node, taken, *spec.cores_per_node));
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace rill::config
