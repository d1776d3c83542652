//! Random, plausible GPU machines as NCCL topology XML, each with a random NCCL environment:
//! the inputs of the differential test against NCCL's own graph code (`tests/it/oracle.rs`,
//! `bench/oracle/`). Pure and deterministic: a seed in, XML text and variables out.
//!
//! Coverage: 1–16 GPUs of SM 70–100 (a few machines mix two SMs); NVSwitch fabrics (full or
//! degraded), NVLink meshes (full, hybrid cube-mesh, random), NVLink bridges or none; PCIe
//! switch trees up to 3 deep with mixed generations and widths, Broadcom two-level switches;
//! 1–8 NUMA nodes with Intel, AMD or Arm CPU ids; 0–16 NICs of mixed speeds, one or two ports,
//! with or without GPUDirect, some on the CPU without a PCI location; VM artefacts (flat
//! `2.5 GT/s x1` bridges, `numaid -1`, x1 and width-0 links); CPUs, devices and NVML indices
//! listed in shuffled orders; one or two nodes.

use std::fmt::Write as _;

/// SplitMix64: small, fast, and good enough to draw machines from.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// One generated machine.
#[derive(Clone, Debug)]
pub struct GenMachine {
    pub seed: u64,
    /// NCCL topology XML of one host.
    pub xml: String,
    /// NCCL variables, in the order they were drawn.
    pub env: Vec<(String, String)>,
    /// Identical hosts in the communicator (1 or 2).
    pub nodes: usize,
    /// A one-line description (GPUs, SM, fabric, CPUs, NICs).
    pub summary: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fabric {
    NvSwitch,
    Mesh,
    Bridges,
    None,
}

impl Fabric {
    fn name(self) -> &'static str {
        match self {
            Fabric::NvSwitch => "nvswitch",
            Fabric::Mesh => "mesh",
            Fabric::Bridges => "bridges",
            Fabric::None => "pcie",
        }
    }
}

#[derive(Clone, Debug)]
enum Item {
    Switch {
        link: (String, u32),
        bcm: bool,
        children: Vec<Item>,
    },
    Gpu(usize),
    Nic(usize),
}

struct Nic {
    ports: Vec<Port>,
    /// Listed as a bare `<nic>` under the CPU (no PCI location), like a socket NIC.
    bare: bool,
    link: (String, u32),
}

struct Port {
    dev: usize,
    speed: u32,
    port: u32,
    guid: u64,
    gdr: bool,
}

const SPEEDS: &[&str] = &[
    "2.5 GT/s PCIe",
    "5.0 GT/s PCIe",
    "8.0 GT/s PCIe",
    "16.0 GT/s PCIe",
    "32.0 GT/s PCIe",
    "64.0 GT/s PCIe",
];

fn pcie_link(r: &mut Rng, vm: bool) -> (String, u32) {
    // Mostly Gen3–Gen5 x16; sometimes narrower, older, newer, or (in a VM) x1 / unknown.
    let speed = match r.below(20) {
        0 => SPEEDS[1],
        1 => SPEEDS[5],
        2..=6 => SPEEDS[2],
        7..=12 => SPEEDS[3],
        _ => SPEEDS[4],
    };
    let width = match r.below(20) {
        0 => 1,
        1 => 4,
        2 | 3 => 8,
        _ => 16,
    };
    if vm && r.chance(0.3) {
        return (speed.to_string(), if r.chance(0.5) { 0 } else { 1 });
    }
    (speed.to_string(), width)
}

/// Draws a machine from `seed`.
///
/// The draws happen phase by phase in a fixed order, each phase taking the generator from the
/// one before: a seed's machine depends on that order, so a new draw goes after the others
/// (or on a generator of its own, as C2C does) to keep every seed's machine as it was.
pub fn generate(seed: u64) -> GenMachine {
    let mut r = Rng::new(seed);
    let shape = draw_shape(&mut r);
    let (nics, nports) = draw_nics(&mut r, seed, shape.nics_n, shape.vm);

    // PCI trees: per CPU a forest of switches up to 3 deep; devices land on the CPU or on a
    // switch of their CPU. GPUs and NICs often share a switch (one NIC per GPU pair).
    let cpu_of_gpu: Vec<usize> = if r.chance(0.6) {
        // Balanced: consecutive GPUs per CPU.
        (0..shape.ngpus)
            .map(|g| g * shape.ncpus / shape.ngpus.max(1))
            .collect()
    } else {
        (0..shape.ngpus).map(|_| r.below(shape.ncpus)).collect()
    };
    let flat_vm = shape.vm && r.chance(0.6);
    let mut pci = draw_switches(&mut r, shape.ncpus, flat_vm, shape.vm);
    place_devices(&mut r, &mut pci, &cpu_of_gpu, &nics, flat_vm);

    // GPUs: NVML indices shuffled against the listing order half the time.
    let mut gpu_dev: Vec<usize> = (0..shape.ngpus).collect();
    if r.chance(0.5) {
        r.shuffle(&mut gpu_dev);
    }
    let gdr_gpu = r.chance(0.9);

    // Switches nothing landed under are not listed (NCCL trims them from its dumps).
    for t in &mut pci.trees {
        prune(t);
    }
    let listing = draw_listing(&mut r, &pci.trees, &shape);
    let nvlinks = draw_nvlinks(&mut r, &shape, &listing);

    // C2C (Grace Hopper/Blackwell): an ARM CPU with sm90+ GPUs attached by C2C half of the
    // time. Drawn from a generator of its own so every other draw of a seed stays as before.
    let mut rc = Rng::new(seed ^ 0xc2c0_c2c0_c2c0_c2c0);
    let c2c = (shape.cpu_kind >= 8 && shape.sms.iter().all(|&s| s >= 90) && rc.chance(0.5))
        .then(|| (rc.pick(&[22_500u32, 45_000]), rc.pick(&[6u32, 10])));

    let ctx = EmitCtx {
        c2c,
        gpu_link: gpu_links_for(&mut r, shape.ngpus, shape.vm),
        gpu_dev,
        gdr_gpu,
        sms: shape.sms.clone(),
        nvlinks,
        nics: &nics,
        listing: &listing,
    };
    let xml = write_xml(&ctx, &shape, &pci.trees);

    let nodes = if nports > 0 && r.chance(0.15) { 2 } else { 1 };
    let env = random_env(&mut r, nodes);
    GenMachine {
        seed,
        xml,
        env,
        nodes,
        summary: summary(&shape, c2c.is_some(), nodes),
    }
}

/// GPUs, SMs, CPUs, NIC count and fabric: the first draws of a seed.
struct Shape {
    ngpus: usize,
    sm_main: u32,
    mixed: bool,
    sm_other: u32,
    sms: Vec<u32>,
    vm: bool,
    ncpus: usize,
    numa_minus_one: bool,
    /// 0–4 Intel, 5–7 AMD, 8–9 Arm.
    cpu_kind: usize,
    arch: &'static str,
    vendor: Option<&'static str>,
    family: u32,
    model: u32,
    nics_n: usize,
    fabric: Fabric,
}

fn draw_shape(r: &mut Rng) -> Shape {
    let ngpus: usize = r.pick(&[
        1, 2, 2, 2, 3, 4, 4, 4, 4, 5, 6, 8, 8, 8, 8, 8, 8, 10, 12, 16, 16,
    ]);
    let sm_main: u32 = r.pick(&[70, 75, 80, 80, 86, 89, 90, 90, 90, 100, 100]);
    let mixed = ngpus > 1 && r.chance(0.05);
    let sm_other: u32 = r.pick(&[70, 80, 86, 89, 90, 100]);
    let sms: Vec<u32> = (0..ngpus)
        .map(|_| {
            if mixed && r.chance(0.5) {
                sm_other
            } else {
                sm_main
            }
        })
        .collect();
    let vm = r.chance(0.15);
    let ncpus = if vm && r.chance(0.5) {
        1
    } else {
        r.pick(&[1, 1, 2, 2, 2, 2, 3, 4, 4, 8])
    };
    let numa_minus_one = vm && ncpus == 1 && r.chance(0.6);
    let cpu_kind = r.below(10);
    let (arch, vendor, family, model) = match cpu_kind {
        0..=4 => (
            "x86_64",
            Some("GenuineIntel"),
            6,
            r.pick(&[0x4f, 0x55, 0x6a, 0x8f, 0xcf]),
        ),
        5..=7 => (
            "x86_64",
            Some("AuthenticAMD"),
            r.pick(&[23, 25]),
            r.pick(&[1, 17, 49]),
        ),
        _ => ("arm64", None, 0, 0),
    };
    let nics_n = r.pick(&[0, 0, 1, 1, 1, 2, 2, 3, 4, 4, 4, 6, 8, 8, 8, 12, 16]);
    let fabric = if ngpus == 1 {
        Fabric::None
    } else {
        match r.below(10) {
            0..=3 => Fabric::NvSwitch,
            4 | 5 => Fabric::Mesh,
            6 | 7 if ngpus >= 2 => Fabric::Bridges,
            _ => Fabric::None,
        }
    };
    Shape {
        ngpus,
        sm_main,
        mixed,
        sm_other,
        sms,
        vm,
        ncpus,
        numa_minus_one,
        cpu_kind,
        arch,
        vendor,
        family,
        model,
        nics_n,
        fabric,
    }
}

/// NIC ports: one or two per NIC, NCCL device numbers shuffled against the listing. Returns
/// the NICs and their port count.
fn draw_nics(r: &mut Rng, seed: u64, nics_n: usize, vm: bool) -> (Vec<Nic>, usize) {
    let mut nics: Vec<Nic> = vec![];
    let mut nports = 0;
    let nic_speed_pool = [
        10_000u32, 25_000, 50_000, 100_000, 200_000, 200_000, 400_000,
    ];
    let uniform_speed = r.chance(0.7).then(|| r.pick(&nic_speed_pool));
    let gdr_all = r.chance(0.8);
    for i in 0..nics_n {
        let two = r.chance(0.15);
        let speed = uniform_speed.unwrap_or_else(|| r.pick(&nic_speed_pool));
        let guid = 0x1000_0000_0000 + ((seed & 0xffff) << 16) + i as u64;
        let gdr = if gdr_all { true } else { r.chance(0.5) };
        let mut ports = vec![];
        for p in 0..(if two { 2 } else { 1 }) {
            ports.push(Port {
                dev: nports,
                speed,
                port: p + 1,
                guid,
                gdr,
            });
            nports += 1;
        }
        let bare = r.chance(0.05);
        let link = pcie_link(r, vm);
        nics.push(Nic { ports, bare, link });
    }
    let mut devs: Vec<usize> = (0..nports).collect();
    if r.chance(0.5) {
        r.shuffle(&mut devs);
    }
    for n in &mut nics {
        for p in &mut n.ports {
            p.dev = devs[p.dev];
        }
    }
    (nics, nports)
}

/// Per CPU, the items on it and the path (child indices from the CPU) of every switch.
struct Pci {
    trees: Vec<Vec<Item>>,
    switch_paths: Vec<Vec<Vec<usize>>>,
}

/// Per CPU a forest of up to 3 switch chains, each up to 3 deep, with a sibling at each
/// level sometimes; none in a flat VM.
fn draw_switches(r: &mut Rng, ncpus: usize, flat_vm: bool, vm: bool) -> Pci {
    let mut trees: Vec<Vec<Item>> = vec![vec![]; ncpus];
    let mut switch_paths: Vec<Vec<Vec<usize>>> = vec![vec![]; ncpus];
    for (c, tree) in trees.iter_mut().enumerate() {
        let tops = if flat_vm { 0 } else { r.range(0, 3) };
        for _ in 0..tops {
            let bcm = r.chance(0.1);
            let depth = r.range(1, 3);
            let mut sw = Item::Switch {
                link: pcie_link(r, vm),
                bcm,
                children: vec![],
            };
            let idx = tree.len();
            let mut path = vec![idx];
            switch_paths[c].push(path.clone());
            // A chain of nested switches, with a sibling at each level sometimes.
            let mut node = &mut sw;
            for _ in 1..depth {
                let Item::Switch { children, .. } = node else {
                    break;
                };
                let n_sib = if r.chance(0.3) { 2 } else { 1 };
                for _ in 0..n_sib {
                    children.push(Item::Switch {
                        link: pcie_link(r, vm),
                        bcm,
                        children: vec![],
                    });
                    let mut p = path.clone();
                    p.push(children.len() - 1);
                    switch_paths[c].push(p);
                }
                path.push(0);
                node = &mut children[0];
            }
            tree.push(sw);
        }
    }
    Pci {
        trees,
        switch_paths,
    }
}

/// The children of the switch at `path` (the CPU's own list for an empty path).
fn at<'a>(items: &'a mut Vec<Item>, path: &[usize]) -> &'a mut Vec<Item> {
    let Some((&i, rest)) = path.split_first() else {
        return items;
    };
    if !matches!(items[i], Item::Switch { .. }) {
        return items;
    }
    match &mut items[i] {
        Item::Switch { children, .. } => at(children, rest),
        _ => unreachable!("checked above"),
    }
}

/// Puts every GPU and NIC on its CPU or on one of its CPU's switches, in a shuffled order
/// half the time; in a flat VM each behind a bridge of its own.
fn place_devices(r: &mut Rng, pci: &mut Pci, cpu_of_gpu: &[usize], nics: &[Nic], flat_vm: bool) {
    let (ngpus, ncpus) = (cpu_of_gpu.len(), pci.trees.len());
    let switch_paths = &pci.switch_paths;
    let mut slot_of_gpu: Vec<(usize, Option<Vec<usize>>)> = vec![];
    for &c in cpu_of_gpu {
        let slot = if switch_paths[c].is_empty() || r.chance(0.15) {
            None
        } else {
            Some(r.pick(&switch_paths[c]))
        };
        slot_of_gpu.push((c, slot));
    }
    let mut placed: Vec<(usize, Option<Vec<usize>>, Item)> = vec![];
    for (g, (c, slot)) in slot_of_gpu.iter().enumerate() {
        placed.push((*c, slot.clone(), Item::Gpu(g)));
    }
    for (n, nic) in nics.iter().enumerate() {
        // Next to a GPU's switch half the time, else anywhere.
        let (c, slot) = if ngpus > 0 && r.chance(0.5) {
            slot_of_gpu[r.below(ngpus)].clone()
        } else {
            let c = r.below(ncpus);
            let slot = if switch_paths[c].is_empty() || r.chance(0.3) {
                None
            } else {
                Some(r.pick(&switch_paths[c]))
            };
            (c, slot)
        };
        // A `<nic>` without its own `<pci>` can only sit on the CPU: under a `<pci>` it
        // would make that element the NIC.
        let slot = if nic.bare { None } else { slot };
        placed.push((c, slot, Item::Nic(n)));
    }
    if r.chance(0.5) {
        r.shuffle(&mut placed);
    }
    for (c, slot, item) in placed {
        // Flat VM bridges: one `2.5 GT/s x1` bridge per device, as hypervisors show them.
        let item = if flat_vm && !matches!(item, Item::Nic(n) if nics[n].bare) {
            Item::Switch {
                link: ("2.5 GT/s PCIe".into(), 1),
                bcm: false,
                children: vec![item],
            }
        } else {
            item
        };
        match slot {
            None => pci.trees[c].push(item),
            Some(p) => at(&mut pci.trees[c], &p).push(item),
        }
    }
}

fn prune(items: &mut Vec<Item>) {
    for it in items.iter_mut() {
        if let Item::Switch { children, .. } = it {
            prune(children);
        }
    }
    items.retain(|it| !matches!(it, Item::Switch { children, .. } if children.is_empty()));
}

/// Bus ids handed out in listing order, a few apart, moving to the next PCI domain past 0xfe.
struct BusIds {
    bus: usize,
    domain: usize,
}

impl BusIds {
    fn next(&mut self, r: &mut Rng) -> String {
        self.bus += r.range(1, 4);
        if self.bus > 0xfe {
            self.domain += 1;
            self.bus = 1;
        }
        format!("{:04x}:{:02x}:00.0", self.domain, self.bus)
    }
}

/// How the machine is listed: CPU order, NUMA ids and every bus id.
struct Listing {
    cpu_order: Vec<usize>,
    numa_ids: Vec<i32>,
    gpu_bus: Vec<String>,
    nic_bus: Vec<String>,
    switch_bus: Vec<String>,
    nvswitch_bus: Vec<String>,
}

fn draw_listing(r: &mut Rng, trees: &[Vec<Item>], shape: &Shape) -> Listing {
    let ncpus = shape.ncpus;
    let mut ids = BusIds {
        bus: r.range(1, 0x20),
        domain: 0,
    };
    let mut cpu_order: Vec<usize> = (0..ncpus).collect();
    if r.chance(0.5) {
        r.shuffle(&mut cpu_order);
    }
    let mut numa_ids: Vec<i32> = (0..ncpus as i32).collect();
    if ncpus > 1 && r.chance(0.3) {
        // Sparse NUMA ids (sub-NUMA clustering hides some).
        numa_ids = (0..ncpus as i32).map(|i| i * 2 + (i % 2)).collect();
    }
    let mut l = Listing {
        cpu_order,
        numa_ids,
        gpu_bus: vec![String::new(); shape.ngpus],
        nic_bus: vec![String::new(); shape.nics_n],
        switch_bus: vec![],
        nvswitch_bus: vec![],
    };
    for &c in &l.cpu_order {
        number(
            &trees[c],
            r,
            &mut ids,
            &mut l.gpu_bus,
            &mut l.nic_bus,
            &mut l.switch_bus,
        );
    }
    l.nvswitch_bus = (0..nvswitch_count(shape.sm_main))
        .map(|_| ids.next(r))
        .collect();
    l
}

/// Assigns bus ids depth first so the tree is numbered like a real one.
fn number(
    items: &[Item],
    r: &mut Rng,
    ids: &mut BusIds,
    gpu_bus: &mut [String],
    nic_bus: &mut [String],
    switch_bus: &mut Vec<String>,
) {
    for it in items {
        match it {
            Item::Switch { children, .. } => {
                switch_bus.push(ids.next(r));
                number(children, r, ids, gpu_bus, nic_bus, switch_bus);
            }
            Item::Gpu(g) => gpu_bus[*g] = ids.next(r),
            Item::Nic(n) => nic_bus[*n] = ids.next(r),
        }
    }
}

fn nvswitch_count(sm_main: u32) -> usize {
    match sm_main {
        70 | 75 => 6,
        80 | 86 | 89 => 6,
        90 => 4,
        _ => 2,
    }
}

fn lanes_per_gpu(sm: u32) -> u32 {
    match sm {
        70 | 75 => 6,
        80 => 12,
        86 | 89 => 4,
        90 => 18,
        _ => 18,
    }
}

/// NVLinks of one GPU: (target bus id, count, target class).
type NvLinks = Vec<(String, u32, &'static str)>;

fn draw_nvlinks(r: &mut Rng, shape: &Shape, l: &Listing) -> Vec<NvLinks> {
    let ngpus = shape.ngpus;
    let mut nvlinks: Vec<NvLinks> = vec![vec![]; ngpus];
    match shape.fabric {
        Fabric::NvSwitch => nvswitch_links(r, &shape.sms, &l.nvswitch_bus, &mut nvlinks),
        Fabric::Mesh => mesh_links(r, &l.gpu_bus, &mut nvlinks),
        Fabric::Bridges => {
            for a in (0..ngpus.saturating_sub(1)).step_by(2) {
                if r.chance(0.85) {
                    let c = r.range(1, 4) as u32;
                    nvlinks[a].push((l.gpu_bus[a + 1].clone(), c, "0x030000"));
                    nvlinks[a + 1].push((l.gpu_bus[a].clone(), c, "0x030000"));
                }
            }
        }
        Fabric::None => {}
    }
    nvlinks
}

/// Each GPU's lanes spread over the NVSwitches, listed in a shuffled order; in a degraded
/// fabric some GPUs lose a lane.
fn nvswitch_links(r: &mut Rng, sms: &[u32], nvswitch_bus: &[String], nvlinks: &mut [NvLinks]) {
    let nvswitch_n = nvswitch_bus.len();
    let degraded = r.chance(0.1);
    for (g, links) in nvlinks.iter_mut().enumerate() {
        let lanes = lanes_per_gpu(sms[g]);
        let mut per: Vec<u32> = vec![lanes / nvswitch_n as u32; nvswitch_n];
        for x in per.iter_mut().take(lanes as usize % nvswitch_n) {
            *x += 1;
        }
        if degraded && r.chance(0.3) {
            let k = r.below(nvswitch_n);
            per[k] = per[k].saturating_sub(1);
        }
        let mut order: Vec<usize> = (0..nvswitch_n).collect();
        r.shuffle(&mut order);
        for k in order {
            if per[k] > 0 {
                links.push((nvswitch_bus[k].clone(), per[k], "0x068000"));
            }
        }
    }
}

/// GPU-to-GPU NVLinks: a full mesh, a hybrid cube-mesh or random pairs.
fn mesh_links(r: &mut Rng, gpu_bus: &[String], nvlinks: &mut [NvLinks]) {
    let ngpus = nvlinks.len();
    let mut pairs: Vec<(usize, usize, u32)> = vec![];
    let style = r.below(3);
    for a in 0..ngpus {
        for b in a + 1..ngpus {
            let link = match style {
                // Full mesh (few GPUs) with equal counts.
                0 if ngpus <= 4 => Some(if ngpus == 2 { 4 } else { 2 }),
                // Hybrid cube-mesh: inside each half, and i <-> i+half.
                1 if ngpus == 8 => {
                    let same_half = a / 4 == b / 4;
                    (same_half || b == a + 4).then_some(if (a + b) % 3 == 0 { 2 } else { 1 })
                }
                _ => r.chance(0.4).then(|| r.range(1, 4) as u32),
            };
            if let Some(c) = link {
                pairs.push((a, b, c));
            }
        }
    }
    for (a, b, c) in pairs {
        nvlinks[a].push((gpu_bus[b].clone(), c, "0x030200"));
        nvlinks[b].push((gpu_bus[a].clone(), c, "0x030200"));
    }
}

/// What the XML writer needs beyond the trees; no draws happen while writing.
struct EmitCtx<'a> {
    gpu_link: Vec<(String, u32)>,
    gpu_dev: Vec<usize>,
    gdr_gpu: bool,
    sms: Vec<u32>,
    nvlinks: Vec<NvLinks>,
    /// Grace-style C2C link of every GPU (bandwidth per link in MB/s, link count).
    c2c: Option<(u32, u32)>,
    nics: &'a [Nic],
    listing: &'a Listing,
}

fn write_xml(ctx: &EmitCtx, shape: &Shape, trees: &[Vec<Item>]) -> String {
    let mut x = String::from("<system version=\"1\">\n");
    let mut sw_i = 0;
    for &c in &ctx.listing.cpu_order {
        let numa = if shape.numa_minus_one {
            -1
        } else {
            ctx.listing.numa_ids[c]
        };
        write_cpu_open(&mut x, shape, c, numa);
        emit(&mut x, &trees[c], 2, &mut sw_i, ctx);
        x.push_str("  </cpu>\n");
    }
    x.push_str("</system>\n");
    x
}

/// The `<cpu>` start tag of the `c`th CPU.
fn write_cpu_open(x: &mut String, shape: &Shape, c: usize, numa: i32) {
    // 16 cores per NUMA node, as `cpumap` prints them (32-bit groups, high first).
    let mut groups = [0u32; 4];
    groups[c / 2] = 0xffff << (16 * (c % 2));
    let affinity = groups
        .iter()
        .rev()
        .map(|g| format!("{g:08x}"))
        .collect::<Vec<_>>()
        .join(",");
    let arch = shape.arch;
    let _ = write!(
        x,
        "  <cpu numaid=\"{numa}\" affinity=\"{affinity}\" arch=\"{arch}\""
    );
    // Every attribute NCCL's ncclTopoGetXmlFromCpu would fill is written: a missing one is
    // filled from the machine running NCCL's code when a rank adds its GPU, and then that
    // rank's `<cpu>` no longer matches the others' in ncclTopoFuseXml (xmlFindNode compares
    // every attribute), so the fused XML would list the CPU twice. An x86 build fills
    // vendor/familyid/modelid even for arm64; NCCL reads them for x86 only.
    let _ = write!(
        x,
        " vendor=\"{}\" familyid=\"{}\" modelid=\"{}\"",
        shape.vendor.unwrap_or("ARM"),
        shape.family,
        shape.model
    );
    x.push_str(">\n");
}

fn emit(x: &mut String, items: &[Item], depth: usize, sw_i: &mut usize, ctx: &EmitCtx) {
    let pad = "  ".repeat(depth);
    for it in items {
        match it {
            Item::Switch {
                link,
                bcm,
                children,
            } => {
                let b = &ctx.listing.switch_bus[*sw_i];
                *sw_i += 1;
                let ids = if *bcm {
                    " vendor=\"0x1000\" device=\"0xc010\" subsystem_vendor=\"0x1000\" subsystem_device=\"0xa064\""
                } else {
                    " vendor=\"0x10b5\" device=\"0x97a0\" subsystem_vendor=\"0x10b5\" subsystem_device=\"0x0000\""
                };
                let _ = writeln!(
                    x,
                    "{pad}<pci busid=\"{b}\" class=\"0x060400\"{ids} link_speed=\"{}\" link_width=\"{}\">",
                    link.0, link.1
                );
                emit(x, children, depth + 1, sw_i, ctx);
                let _ = writeln!(x, "{pad}</pci>");
            }
            Item::Gpu(g) => emit_gpu(x, &pad, *g, ctx),
            Item::Nic(n) => emit_nic(x, &pad, *n, ctx),
        }
    }
}

fn emit_gpu(x: &mut String, pad: &str, g: usize, ctx: &EmitCtx) {
    let (speed, width) = &ctx.gpu_link[g];
    let _ = writeln!(
        x,
        "{pad}<pci busid=\"{}\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" subsystem_vendor=\"0x10de\" subsystem_device=\"0x16c1\" link_speed=\"{speed}\" link_width=\"{width}\">",
        ctx.listing.gpu_bus[g]
    );
    let dev = ctx.gpu_dev[g];
    let gdr = u8::from(ctx.gdr_gpu);
    let sm = ctx.sms[g];
    if ctx.nvlinks[g].is_empty() && ctx.c2c.is_none() {
        let _ = writeln!(
            x,
            "{pad}  <gpu dev=\"{dev}\" sm=\"{sm}\" rank=\"{dev}\" gdr=\"{gdr}\"/>"
        );
    } else {
        let _ = writeln!(
            x,
            "{pad}  <gpu dev=\"{dev}\" sm=\"{sm}\" rank=\"{dev}\" gdr=\"{gdr}\">"
        );
        for (t, c, cls) in &ctx.nvlinks[g] {
            let _ = writeln!(
                x,
                "{pad}    <nvlink target=\"{t}\" count=\"{c}\" tclass=\"{cls}\"/>"
            );
        }
        if let Some((bw, count)) = ctx.c2c {
            let _ = writeln!(x, "{pad}    <c2c bw=\"{bw}\" count=\"{count}\"/>");
        }
        let _ = writeln!(x, "{pad}  </gpu>");
    }
    let _ = writeln!(x, "{pad}</pci>");
}

fn emit_nic(x: &mut String, pad: &str, n: usize, ctx: &EmitCtx) {
    let nic = &ctx.nics[n];
    let inner = if nic.bare {
        pad.to_string()
    } else {
        format!("{pad}  ")
    };
    if !nic.bare {
        let _ = writeln!(
            x,
            "{pad}<pci busid=\"{}\" class=\"0x020000\" vendor=\"0x15b3\" device=\"0x101b\" subsystem_vendor=\"0x15b3\" subsystem_device=\"0x0007\" link_speed=\"{}\" link_width=\"{}\">",
            ctx.listing.nic_bus[n], nic.link.0, nic.link.1
        );
    }
    let _ = writeln!(x, "{inner}<nic>");
    for p in &nic.ports {
        let _ = writeln!(
            x,
            "{inner}  <net name=\"mlx5_{}\" dev=\"{}\" speed=\"{}\" port=\"{}\" latency=\"0.000000\" guid=\"0x{:x}\" maxconn=\"131072\" gdr=\"{}\"/>",
            p.dev,
            p.dev,
            p.speed,
            p.port,
            p.guid,
            u8::from(p.gdr)
        );
    }
    let _ = writeln!(x, "{inner}</nic>");
    if !nic.bare {
        let _ = writeln!(x, "{pad}</pci>");
    }
}

/// `GenMachine::summary`.
fn summary(shape: &Shape, c2c: bool, nodes: usize) -> String {
    format!(
        "{} GPU sm{}{} {} {}x{}{} {} NIC{}{}",
        shape.ngpus,
        shape.sm_main,
        if shape.mixed {
            format!("+sm{}", shape.sm_other)
        } else {
            String::new()
        },
        shape.fabric.name(),
        shape.ncpus,
        match shape.cpu_kind {
            0..=4 => "intel",
            5..=7 => "amd",
            _ => "arm",
        },
        if c2c { " c2c" } else { "" },
        shape.nics_n,
        if shape.vm { " vm" } else { "" },
        if nodes > 1 { " x2" } else { "" },
    )
}

fn gpu_links_for(r: &mut Rng, ngpus: usize, vm: bool) -> Vec<(String, u32)> {
    // One PCIe link for all GPUs of a machine, sometimes one odd one out.
    let base = pcie_link(r, vm);
    let odd = (ngpus > 1 && r.chance(0.1)).then(|| r.below(ngpus));
    let other = pcie_link(r, vm);
    (0..ngpus)
        .map(|g| {
            if Some(g) == odd {
                other.clone()
            } else {
                base.clone()
            }
        })
        .collect()
}

/// A random environment from the variables NCCL's graph, path and channel code reads.
fn random_env(r: &mut Rng, nodes: usize) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![];
    let mut set = |k: &str, v: String| env.push((k.to_string(), v));
    if r.chance(0.35) {
        // Most machines run with NCCL's defaults.
        return env;
    }
    if r.chance(0.12) {
        set("NCCL_P2P_DISABLE", "1".into());
    } else if r.chance(0.12) {
        set(
            "NCCL_P2P_LEVEL",
            r.pick(&["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "2", "5"])
                .into(),
        );
    }
    if r.chance(0.12) {
        set("NCCL_NVLS_ENABLE", r.pick(&["0", "1"]).into());
    }
    if r.chance(0.08) {
        set("NCCL_NVB_DISABLE", "1".into());
    }
    if r.chance(0.06) {
        set("NCCL_SHM_DISABLE", "1".into());
    }
    if r.chance(0.1) {
        set("NCCL_MIN_NCHANNELS", r.range(1, 32).to_string());
    }
    if r.chance(0.1) {
        set("NCCL_MAX_NCHANNELS", r.range(1, 32).to_string());
    }
    if r.chance(0.08) {
        set("NCCL_MIN_CTAS", r.range(1, 32).to_string());
    }
    if r.chance(0.08) {
        set("NCCL_MAX_CTAS", r.range(1, 32).to_string());
    }
    if nodes > 1 || r.chance(0.3) {
        if r.chance(0.15) {
            set("NCCL_CROSS_NIC", r.pick(&["0", "1", "2"]).into());
        }
        if r.chance(0.15) {
            set(
                "NCCL_NET_GDR_LEVEL",
                r.pick(&["LOC", "PIX", "PXB", "PHB", "SYS"]).into(),
            );
        }
        if r.chance(0.1) {
            set("NCCL_NET_GDR_READ", r.pick(&["0", "1"]).into());
        }
        if r.chance(0.12) {
            set("NCCL_PXN_DISABLE", "1".into());
        }
        if r.chance(0.06) {
            set("NCCL_NCHANNELS_PER_NET_PEER", r.range(1, 4).to_string());
        }
        // Read from 2.29 (src/graph/paths.cc) and 2.30 (src/init.cc); earlier releases ignore
        // them. Drawn last, so that the machines and variables drawn before stay as they were.
        if r.chance(0.12) {
            set(
                "NCCL_P2P_PER_CHANNEL_NET_BW",
                r.pick(&["4", "7", "14", "28"]).into(),
            );
        }
        if r.chance(0.12) {
            set("NCCL_P2P_MAX_PEERS", r.pick(&["1", "8", "16", "64"]).into());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_machine() {
        for s in 0..20 {
            let a = generate(s);
            let b = generate(s);
            assert_eq!(a.xml, b.xml);
            assert_eq!(a.env, b.env);
        }
        assert_ne!(generate(1).xml, generate(2).xml);
    }

    #[test]
    fn machines_parse_and_cover_the_ranges() {
        let mut gpus = std::collections::BTreeSet::new();
        let mut fabrics = std::collections::BTreeSet::new();
        for s in 0..300 {
            let m = generate(s);
            let n = m.xml.matches("<gpu ").count();
            assert!((1..=16).contains(&n), "{}", m.summary);
            gpus.insert(n);
            fabrics.insert(m.summary.split(' ').nth(3).unwrap_or("").to_string());
            assert!(m.xml.matches("<cpu ").count() <= 8);
            assert!(m.xml.matches("<nic>").count() <= 16);
        }
        assert!(gpus.contains(&1) && gpus.contains(&16), "{gpus:?}");
        assert_eq!(fabrics.len(), 4, "{fabrics:?}");
    }

    /// The differential sweep must meet ARM CPUs, C2C-attached GPUs and NVLink-bridge paths
    /// among the generated machines. NVB paths (two GPUs joined through a third's NVLinks) come
    /// from the partial meshes: hybrid cube-mesh and random links.
    #[test]
    fn arm_c2c_and_nvlink_bridges_are_generated() {
        let ms: Vec<GenMachine> = (0..300).map(generate).collect();
        let arm = ms
            .iter()
            .filter(|m| m.xml.contains("arch=\"arm64\""))
            .count();
        let c2c: Vec<&GenMachine> = ms.iter().filter(|m| m.xml.contains("<c2c ")).collect();
        assert!(arm >= 30, "{arm} ARM machines");
        assert!(c2c.len() >= 5, "{} C2C machines", c2c.len());
        assert!(
            c2c.iter()
                .all(|m| m.summary.contains(" c2c ") && m.xml.contains("arch=\"arm64\""))
        );
        let partial_mesh = ms.iter().filter(|m| {
            let nvl = m.xml.matches("<nvlink ").count();
            let g = m.xml.matches("<gpu ").count();
            m.summary.split(' ').nth(3) == Some("mesh") && g > 2 && nvl < g * (g - 1)
        });
        assert!(partial_mesh.count() >= 10);
    }
}
