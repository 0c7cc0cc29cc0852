//! SaQuery: one Subnet Administration query answered by the daemon's SA service. The request
//! is turned into the SA MAD a client would send (header, component mask, the template
//! zero-padded to the 200 SA data bytes) and handed to [`fabric_sa::SaService::handle`] with a
//! requester standing for a local client (LID 0): the same code path as the MADs of the wire,
//! counted in the same metrics. The SA's status (no records, not supported, bad component mask)
//! is a field of the answer; only a malformed request (INVALID_ARGUMENT), an SA that does not
//! serve (FAILED_PRECONDITION) or an answer too big for one message (RESOURCE_EXHAUSTED) is a
//! gRPC error. Answers are built on a blocking thread (a whole PathRecord table is heavy).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use fabric_proto::v1 as pb;
use fabric_sa::wire::{self, SaHeader, SA_DATA_SIZE, SA_HEADER_SIZE};
use fabric_sa::{Requester, SaResponse};
use tonic::{Request, Response, Status};

use super::FabricService;
use crate::sa::{attribute_by_name, attribute_name, record_json, status_text};

/// Longest template of a GET_MULTI request (a MultiPathRecord with its GIDs, reassembled from
/// several MADs on the wire).
pub const MAX_SA_MULTI_TEMPLATE: usize = 64 * 1024;

/// Largest answer (record bytes) one SaQuery returns; a bigger table is refused with
/// RESOURCE_EXHAUSTED naming its size (narrow the query with a component mask).
pub const MAX_SA_ANSWER_BYTES: usize = 256 << 20;

/// Transaction ids of the queries of this process.
static NEXT_TID: AtomicU64 = AtomicU64::new(1);

/// The SA MAD (header and SA data) of a query; the error names the offending field.
pub(super) fn query_mad(r: &pb::SaQueryRequest, tid: u64) -> Result<Vec<u8>, String> {
    let method = match pb::SaMethod::try_from(r.method).unwrap_or(pb::SaMethod::Unspecified) {
        pb::SaMethod::Get => wire::METHOD_GET,
        pb::SaMethod::GetTable => wire::METHOD_GET_TABLE,
        pb::SaMethod::GetMulti => wire::METHOD_GET_MULTI,
        pb::SaMethod::Set => wire::METHOD_SET,
        pb::SaMethod::Delete => wire::METHOD_DELETE,
        pb::SaMethod::Unspecified => {
            return Err(format!(
                "method is required (GET, GET_TABLE, GET_MULTI, SET or DELETE; got {})",
                r.method
            ))
        }
    };
    let attr_id = match (r.attribute.trim(), r.attribute_id) {
        ("", 0) => {
            return Err("attribute (a name such as \"NodeRecord\" or \"nr\") or attribute_id is required".into())
        }
        ("", id) => u16::try_from(id).map_err(|_| format!("attribute_id {id:#x} is not a 16-bit attribute id"))?,
        (name, id) => {
            let named = attribute_by_name(name).ok_or_else(|| {
                format!(
                    "attribute {}: unknown SA attribute (e.g. NodeRecord/nr, PortInfoRecord/pir, PathRecord/pr)",
                    super::request::quoted_key(name)
                )
            })?;
            if id != 0 && id != u32::from(named) {
                return Err(format!(
                    "attribute {name:?} is {named:#06x} but attribute_id is {id:#06x}: give one of the two"
                ));
            }
            named
        }
    };
    let max = if method == wire::METHOD_GET_MULTI {
        MAX_SA_MULTI_TEMPLATE
    } else {
        SA_DATA_SIZE
    };
    if r.template.len() > max {
        return Err(format!(
            "template is {} bytes, more than the {max} bytes of SA data a {} request carries",
            r.template.len(),
            if method == wire::METHOD_GET_MULTI {
                "GET_MULTI"
            } else {
                "single-MAD"
            }
        ));
    }
    let header = SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method,
        tid,
        attr_id,
        attr_mod: r.attribute_modifier,
        component_mask: r.component_mask,
        ..SaHeader::default()
    };
    let mut mad = vec![0u8; SA_HEADER_SIZE + r.template.len().max(SA_DATA_SIZE)];
    header.encode(&mut mad);
    mad[SA_HEADER_SIZE..SA_HEADER_SIZE + r.template.len()].copy_from_slice(&r.template);
    Ok(mad)
}

/// The gRPC answer of an SA response built from snapshot `version`.
pub(super) fn query_answer(resp: &SaResponse, version: u64) -> Result<pb::SaQueryResponse, Status> {
    let h = &resp.header;
    let records: Vec<&[u8]> = if h.status != wire::status::OK || resp.data.is_empty() {
        Vec::new()
    } else if h.attr_offset == 0 {
        vec![&resp.data[..]]
    } else {
        resp.data.chunks(usize::from(h.attr_offset) * 8).collect()
    };
    if resp.data.len() > MAX_SA_ANSWER_BYTES {
        return Err(Status::resource_exhausted(format!(
            "the SA answer holds {} records ({} bytes), more than the {MAX_SA_ANSWER_BYTES} bytes one SaQuery \
             returns: narrow the query with a component mask (e.g. the source LID of a PathRecord)",
            records.len(),
            resp.data.len()
        )));
    }
    Ok(pb::SaQueryResponse {
        status: u32::from(h.status),
        status_text: status_text(h.status).into(),
        attribute_id: u32::from(h.attr_id),
        attribute: attribute_name(h.attr_id).unwrap_or_default().into(),
        response_method: u32::from(h.method),
        attribute_offset: u32::from(h.attr_offset),
        records: records
            .into_iter()
            .map(|raw| pb::SaRecord {
                raw: raw.to_vec(),
                json: record_json(h.attr_id, raw).unwrap_or_default(),
            })
            .collect(),
        snapshot_version: version,
    })
}

impl FabricService {
    pub(super) async fn handle_sa_query(
        &self,
        req: Request<pb::SaQueryRequest>,
    ) -> Result<Response<pb::SaQueryResponse>, Status> {
        let r = req.into_inner();
        let mad = query_mad(&r, NEXT_TID.fetch_add(1, Ordering::Relaxed)).map_err(Status::invalid_argument)?;
        let Some(sa) = self.shared.sa.clone() else {
            return Err(Status::failed_precondition("this fabricd has no subnet administrator"));
        };
        if !sa.serving() {
            let why = if self.snapshot().current.is_none() {
                "the subnet administrator does not answer yet: no routing generation is installed"
            } else {
                "the subnet administrator does not answer: this fabricd is not the master subnet manager \
                 (standby while another manager is master, or the subnet is not configured yet)"
            };
            return Err(Status::failed_precondition(why));
        }
        let answer = tokio::task::spawn_blocking(move || {
            let version = sa.subnet().version;
            sa.handle(&mad, &Requester::default(), SystemTime::now())
                .map(|resp| query_answer(&resp, version))
        })
        .await
        .map_err(|e| Status::internal(format!("SA query failed: {e}")))?;
        match answer {
            Some(a) => Ok(Response::new(a?)),
            // Answered by nothing: the SA stopped serving between the check and the query.
            None => Err(Status::failed_precondition(
                "the subnet administrator stopped answering (this fabricd is no longer the master subnet manager)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: pb::SaMethod, attribute: &str, template: Vec<u8>) -> pb::SaQueryRequest {
        pb::SaQueryRequest {
            method: method as i32,
            attribute: attribute.into(),
            template,
            component_mask: 0x3,
            ..Default::default()
        }
    }

    #[test]
    fn a_query_is_the_mad_a_client_sends() {
        let mad = query_mad(&req(pb::SaMethod::GetTable, "pir", vec![0, 7, 3]), 42).unwrap();
        assert_eq!(mad.len(), 256, "the template is padded to one MAD");
        let h = SaHeader::decode(&mad).unwrap();
        assert_eq!(
            (h.class_version, h.method, h.attr_id, h.tid, h.component_mask),
            (2, wire::METHOD_GET_TABLE, wire::attr::PORT_INFO_RECORD, 42, 3)
        );
        assert_eq!(&mad[56..60], &[0, 7, 3, 0]);
        // By id, even one the SA does not know (it answers that itself).
        let mut r = req(pb::SaMethod::Get, "", vec![]);
        r.attribute_id = 0x1234;
        assert_eq!(SaHeader::decode(&query_mad(&r, 1).unwrap()).unwrap().attr_id, 0x1234);
        // GET_MULTI carries more than one MAD of data.
        let m = query_mad(&req(pb::SaMethod::GetMulti, "mpr", vec![1; 1000]), 1).unwrap();
        assert_eq!(m.len(), 56 + 1000);
    }

    #[test]
    fn malformed_queries_name_the_field() {
        let e = |r: pb::SaQueryRequest| query_mad(&r, 1).unwrap_err();
        assert!(e(req(pb::SaMethod::Unspecified, "nr", vec![])).starts_with("method is required"));
        assert!(e(req(pb::SaMethod::Get, "", vec![])).starts_with("attribute (a name"));
        assert!(e(req(pb::SaMethod::Get, "NoSuchRecord", vec![])).starts_with("attribute \"NoSuchRecord\": unknown"));
        let mut r = req(pb::SaMethod::Get, "", vec![]);
        r.attribute_id = 0x10000;
        assert!(e(r).contains("attribute_id 0x10000"));
        let mut r = req(pb::SaMethod::Get, "nr", vec![]);
        r.attribute_id = 0x12;
        assert!(e(r).contains("give one of the two"));
        assert!(e(req(pb::SaMethod::Get, "nr", vec![0; 201])).starts_with("template is 201 bytes"));
        assert!(e(req(pb::SaMethod::GetMulti, "mpr", vec![0; 65537])).contains("GET_MULTI"));
    }

    #[test]
    fn answers_split_records_at_the_attribute_offset_and_errors_carry_none() {
        let mut header = SaHeader {
            method: wire::METHOD_GET_TABLE_RESP,
            attr_id: wire::attr::LINK_RECORD,
            attr_offset: 1,
            ..SaHeader::default()
        };
        let table = SaResponse {
            header,
            data: (0..24).collect(),
        };
        let a = query_answer(&table, 7).unwrap();
        assert_eq!(a.records.len(), 3);
        assert_eq!(a.records[2].raw, (16..24).collect::<Vec<u8>>());
        assert_eq!(
            (a.attribute.as_str(), a.snapshot_version, a.status),
            ("LinkRecord", 7, 0)
        );
        header.status = wire::status::NO_RECORDS;
        header.attr_offset = 0;
        let e = query_answer(
            &SaResponse {
                header,
                data: vec![0; 200],
            },
            7,
        )
        .unwrap();
        assert!(e.records.is_empty());
        assert_eq!((e.status, e.status_text.as_str()), (0x0300, "ERR_NO_RECORDS"));
    }
}
