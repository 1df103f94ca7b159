//! Reading a node's attributes and decoding tensors of the protobuf model.

use crate::te::{HostData, HostTensor};

use super::proto::{AttributeProto, NodeProto, TensorProto, attribute_proto, tensor_proto};

/// A node's attributes, read by name with their types checked.
pub(super) struct Attributes<'a> {
    node: &'a NodeProto,
}

/// Why an attribute could not be read; the import adds the node.
pub(super) type AttrResult<T> = Result<T, String>;

impl<'a> Attributes<'a> {
    pub(super) fn of(node: &'a NodeProto) -> Attributes<'a> {
        Attributes { node }
    }

    fn find(&self, key: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == key)
    }

    /// The names of the attributes present.
    pub(super) fn names(&self) -> Vec<&'a str> {
        self.node.attribute.iter().map(|a| a.name()).collect()
    }

    fn typed(
        &self,
        key: &str,
        want: attribute_proto::AttributeType,
    ) -> AttrResult<Option<&'a AttributeProto>> {
        let Some(attr) = self.find(key) else {
            return Ok(None);
        };
        // Old exporters leave `type` unset; then the field that is set decides.
        if attr.r#type.is_some() && attr.r#type() != want {
            return Err(format!(
                "attribute '{key}' is {:?}, expected {:?}",
                attr.r#type(),
                want
            ));
        }
        Ok(Some(attr))
    }

    pub(super) fn int(&self, key: &str) -> AttrResult<Option<i64>> {
        Ok(self
            .typed(key, attribute_proto::AttributeType::Int)?
            .map(|a| a.i()))
    }

    pub(super) fn int_or(&self, key: &str, default: i64) -> AttrResult<i64> {
        Ok(self.int(key)?.unwrap_or(default))
    }

    pub(super) fn float_or(&self, key: &str, default: f32) -> AttrResult<f32> {
        Ok(self
            .typed(key, attribute_proto::AttributeType::Float)?
            .map_or(default, |a| a.f()))
    }

    pub(super) fn ints(&self, key: &str) -> AttrResult<Option<Vec<i64>>> {
        Ok(self
            .typed(key, attribute_proto::AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    pub(super) fn string(&self, key: &str) -> AttrResult<Option<String>> {
        self.typed(key, attribute_proto::AttributeType::String)?
            .map(|a| {
                String::from_utf8(a.s().to_vec())
                    .map_err(|_| format!("attribute '{key}' is not UTF-8"))
            })
            .transpose()
    }

    pub(super) fn tensor(&self, key: &str) -> AttrResult<Option<&'a TensorProto>> {
        Ok(self
            .typed(key, attribute_proto::AttributeType::Tensor)?
            .and_then(|a| a.t.as_ref()))
    }

    /// The attribute of a Constant node's value, whichever form it takes.
    pub(super) fn constant_value(&self) -> AttrResult<HostTensor> {
        if let Some(t) = self.tensor("value")? {
            return decode_tensor(t);
        }
        if let Some(a) = self.find("value_float") {
            return HostTensor::from_f32(&[], vec![a.f()]).map_err(|e| e.to_string());
        }
        if let Some(a) = self.find("value_floats") {
            return HostTensor::from_f32(&[a.floats.len()], a.floats.clone())
                .map_err(|e| e.to_string());
        }
        if let Some(a) = self.find("value_int") {
            return HostTensor::new(&[], HostData::I64(vec![a.i()])).map_err(|e| e.to_string());
        }
        if let Some(a) = self.find("value_ints") {
            return HostTensor::new(&[a.ints.len()], HostData::I64(a.ints.clone()))
                .map_err(|e| e.to_string());
        }
        Err(format!(
            "a Constant needs one of value, value_float(s), value_int(s); it has {:?}",
            self.names()
        ))
    }
}

/// A tensor of the model as a host tensor (f32, f64, i32, i64 or bool;
/// smaller integer types widen to i32, unsigned 32-bit to i64).
pub(super) fn decode_tensor(t: &TensorProto) -> AttrResult<HostTensor> {
    use tensor_proto::DataType as D;
    if t.data_location() == tensor_proto::DataLocation::External {
        return Err(format!(
            "tensor '{}' keeps its data in an external file, which tessera does not read; save the model with its data inside (onnx.save(model, path, save_as_external_data=False))",
            t.name()
        ));
    }
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(
            usize::try_from(d).map_err(|_| format!("tensor '{}' has dimension {d}", t.name()))?,
        );
    }
    let count: usize = shape.iter().product();
    let raw = t.raw_data();
    let from_raw = |width: usize| -> AttrResult<Vec<&[u8]>> {
        if raw.len() != count * width {
            return Err(format!(
                "tensor '{}' of shape {shape:?} has {} bytes of data, expected {}",
                t.name(),
                raw.len(),
                count * width
            ));
        }
        Ok(raw.chunks_exact(width).collect())
    };
    let data_type = D::try_from(t.data_type()).map_err(|_| {
        format!(
            "tensor '{}' has unknown data type {}",
            t.name(),
            t.data_type()
        )
    })?;
    let data = match data_type {
        D::Float if t.raw_data.is_some() => HostData::F32(
            from_raw(4)?
                .into_iter()
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
        D::Float => HostData::F32(t.float_data.clone()),
        D::Double if t.raw_data.is_some() => HostData::F64(
            from_raw(8)?
                .into_iter()
                .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        D::Double => HostData::F64(t.double_data.clone()),
        D::Int64 if t.raw_data.is_some() => HostData::I64(
            from_raw(8)?
                .into_iter()
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        D::Int64 => HostData::I64(t.int64_data.clone()),
        D::Int32 if t.raw_data.is_some() => HostData::I32(
            from_raw(4)?
                .into_iter()
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
        D::Int32 | D::Int16 | D::Int8 | D::Uint8 | D::Uint16 if t.raw_data.is_none() => {
            HostData::I32(t.int32_data.clone())
        }
        D::Int8 => HostData::I32(
            from_raw(1)?
                .into_iter()
                .map(|b| i32::from(b[0] as i8))
                .collect(),
        ),
        D::Uint8 => HostData::I32(from_raw(1)?.into_iter().map(|b| i32::from(b[0])).collect()),
        D::Bool if t.raw_data.is_some() => {
            HostData::Bool(from_raw(1)?.into_iter().map(|b| b[0] != 0).collect())
        }
        D::Bool => HostData::Bool(t.int32_data.iter().map(|&v| v != 0).collect()),
        other => {
            return Err(format!(
                "tensor '{}' is {}, which tessera does not read (f32, f64, i64, i32, i8, u8, bool)",
                t.name(),
                other.as_str_name()
            ));
        }
    };
    HostTensor::new(&shape, data).map_err(|e| format!("tensor '{}': {e}", t.name()))
}
