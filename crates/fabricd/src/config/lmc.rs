//! `[routing] lmc` against the engine: `layered:K` (Slim Fly paper seed 003 §5.1) routes layer
//! `i` on LID offset `i` of every end port, so the plan needs `K` layer offsets: `2^LMC − 1`
//! with LMC ≥ 1 (the last offset is the escape LID, fabric-routing `lid`), 1 with LMC 0.

use fabric_routing::layered::lmc_for_layers;
use fabric_routing::EngineKind;

/// Layer offsets of a plan with `lmc` (1 with LMC 0, `2^lmc − 1` otherwise).
pub(crate) fn layer_offsets(lmc: u8) -> usize {
    if lmc == 0 {
        1
    } else {
        (1usize << lmc.min(7)) - 1
    }
}

/// Why `kind` does not fit `lmc` (`None`: it fits; only `layered:K` can misfit).
pub(crate) fn layers_misfit(kind: EngineKind, lmc: u8) -> Option<String> {
    let k = kind.layers();
    let have = layer_offsets(lmc);
    (k > have).then(|| {
        let need = lmc_for_layers(k).map_or("an LMC above 7".to_string(), |l| format!("lmc = {l}"));
        format!(
            "{lmc} gives {have} layer LID offset(s) per end port (2^LMC − 1, the last offset being the escape LID) \
             but engine {kind} routes {k} layers, one per offset: set {need} or fewer layers"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layered_needs_its_offsets() {
        let l = |k| EngineKind::Layered { k, seed: 0 };
        assert_eq!(layers_misfit(l(3), 2), None);
        assert_eq!(layers_misfit(l(7), 3), None);
        assert_eq!(layers_misfit(l(1), 0), None);
        assert_eq!(layers_misfit(EngineKind::Dmodc, 0), None);
        let e = layers_misfit(l(4), 2).unwrap();
        assert!(e.contains("set lmc = 3"), "{e}");
        assert!(layers_misfit(l(2), 1).unwrap().contains("set lmc = 2"));
        assert!(layers_misfit(l(128), 7).unwrap().contains("above 7"));
    }

    #[test]
    fn config_check_names_the_lmc_a_layered_engine_needs() {
        use crate::config::Config;
        let e = Config::parse("[routing]\nengine = \"layered:4\"\nlmc = 2\n", "t.toml").unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        assert_eq!(e.issues[0].path, "routing.lmc", "{e}");
        assert!(e.to_string().contains("set lmc = 3"), "{e}");
        let c = Config::parse("[routing]\nengine = \"layered:3\"\nlmc = 2\nseed = 5\n", "t.toml").unwrap();
        assert_eq!(c.engine_kind(), Ok(EngineKind::Layered { k: 3, seed: 5 }));
        let c = Config::parse("[routing]\nengine = \"layered:7:9\"\nlmc = 3\nseed = 5\n", "t.toml").unwrap();
        assert_eq!(c.engine_kind(), Ok(EngineKind::Layered { k: 7, seed: 9 }));
        assert!(Config::parse("[routing]\nlmc = 7\n", "t.toml").is_ok());
        assert!(Config::parse("[routing]\nlmc = 8\n", "t.toml").is_err());
    }
}
