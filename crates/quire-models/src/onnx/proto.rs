//! Just enough of the protocol-buffer wire format to write an ONNX model: varints,
//! length-delimited fields and 32-bit floats. ONNX's schema is proto2, so repeated numbers
//! are written one field each (unpacked), which every reader accepts.
//!
//! Field numbers are ONNX's (`onnx/onnx.proto3`); each message type below names the ones it
//! uses.

/// A message being written: its fields, encoded, in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Message(Vec<u8>);

impl Message {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The encoded bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        varint(&mut self.0, (u64::from(field) << 3) | u64::from(wire_type));
    }

    /// An integer field (int32, int64, enum): two's complement for negatives, as protobuf
    /// encodes `int64`.
    pub(crate) fn int(mut self, field: u32, value: i64) -> Self {
        self.key(field, 0);
        varint(&mut self.0, value as u64);
        self
    }

    /// A `float` field.
    pub(crate) fn float(mut self, field: u32, value: f32) -> Self {
        self.key(field, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A `bytes` field.
    pub(crate) fn bytes(mut self, field: u32, value: &[u8]) -> Self {
        self.key(field, 2);
        varint(&mut self.0, value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    /// A `string` field.
    pub(crate) fn string(self, field: u32, value: &str) -> Self {
        self.bytes(field, value.as_bytes())
    }

    /// An embedded message.
    pub(crate) fn message(self, field: u32, value: Message) -> Self {
        self.bytes(field, &value.0)
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::Message;

    /// The examples of the protobuf encoding guide.
    #[test]
    fn encodes_like_protobuf() {
        assert_eq!(Message::new().int(1, 150).into_bytes(), [0x08, 0x96, 0x01]);
        assert_eq!(
            Message::new().string(2, "testing").into_bytes(),
            [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']
        );
        assert_eq!(
            Message::new().int(1, -2).into_bytes(),
            [
                0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ]
        );
        assert_eq!(
            Message::new().float(2, 1.0).into_bytes(),
            [0x15, 0x00, 0x00, 0x80, 0x3f]
        );
        let inner = Message::new().int(1, 150);
        assert_eq!(
            Message::new().message(3, inner).into_bytes(),
            [0x1a, 0x03, 0x08, 0x96, 0x01]
        );
    }
}
