//! Libraries stored inside Android APKs (zip files), written `PATH!/ENTRY`
//! (`/data/app/…/base.apk!/lib/arm64-v8a/libfoo.so`). Android's loader maps such a library straight from
//! the APK when the entry is stored uncompressed at a page-aligned offset, so its code is at
//! (the entry's data offset in the APK + its offset in the library): where uprobes go. (Frames in such
//! mappings are named by blazesym, which reads APKs itself: `symbols::user`.)
//!
//! A reader of its own rather than a crate: no zip crate is at hand offline, blazesym's reader is private,
//! and what is needed is small: the end-of-central-directory record, the central directory and one local
//! header, every read bounds-checked (an APK is user input).

use std::ops::Range;
use std::path::Path;

/// The page size an entry's data must be aligned to for the loader to map it (`zipalign -p`).
pub const PAGE: u64 = 4096;

/// `PATH!/ENTRY` split into the APK's path and the entry's name in the zip (`lib/x86_64/libfoo.so`);
/// `None` for a plain path.
pub fn split(path: &Path) -> Option<(&Path, &str)> {
    let (apk, entry) = path.to_str()?.split_once("!/")?;
    Some((Path::new(apk), entry))
}

/// The file on disk that `path` is in: the APK of `PATH!/ENTRY`, else `path` itself.
pub fn file_on_disk(path: &Path) -> &Path {
    split(path).map_or(path, |(apk, _)| apk)
}

/// One entry of the central directory.
#[derive(Debug, PartialEq, Eq)]
struct Entry<'a> {
    name: &'a [u8],
    method: u16,
    compressed_size: u64,
    local_header: u64,
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

const END_SIGNATURE: u32 = 0x0605_4b50;
const CENTRAL_SIGNATURE: u32 = 0x0201_4b50;
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;
const END_SIZE: usize = 22;
const CENTRAL_SIZE: usize = 46;
const LOCAL_SIZE: usize = 30;

/// The central directory's entries, from the end-of-central-directory record (searched backwards over
/// the archive comment, at most 64 KiB).
fn entries(zip: &[u8]) -> Result<Vec<Entry<'_>>, &'static str> {
    let not_zip = "it is not a zip file (no end-of-central-directory record)";
    let lowest = zip.len().saturating_sub(END_SIZE + usize::from(u16::MAX));
    let end = (lowest..=zip.len().checked_sub(END_SIZE).ok_or(not_zip)?)
        .rev()
        .find(|&at| u32_at(zip, at) == Some(END_SIGNATURE))
        .ok_or(not_zip)?;
    let count = u16_at(zip, end + 10).ok_or(not_zip)?;
    let offset = u32_at(zip, end + 16).ok_or(not_zip)?;
    if count == u16::MAX || offset == u32::MAX {
        return Err("it is a zip64 archive, which steadytrace does not read");
    }
    let malformed = "its central directory is malformed";
    let mut at = offset as usize;
    let mut found = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        if u32_at(zip, at) != Some(CENTRAL_SIGNATURE) {
            return Err(malformed);
        }
        let field = |offset| u16_at(zip, at + offset).ok_or(malformed);
        let (name_len, extra_len, comment_len) = (field(28)?, field(30)?, field(32)?);
        let name_start = at + CENTRAL_SIZE;
        let name = zip.get(name_start..name_start + usize::from(name_len)).ok_or(malformed)?;
        found.push(Entry {
            name,
            method: field(10)?,
            compressed_size: u64::from(u32_at(zip, at + 20).ok_or(malformed)?),
            local_header: u64::from(u32_at(zip, at + 42).ok_or(malformed)?),
        });
        at = name_start + usize::from(name_len) + usize::from(extra_len) + usize::from(comment_len);
    }
    Ok(found)
}

/// Where the data of `entry` begins: after its local header, whose name and extra field lengths may
/// differ from the central directory's (zipalign pads the local extra field).
fn data_start(zip: &[u8], entry: &Entry) -> Option<u64> {
    let at = usize::try_from(entry.local_header).ok()?;
    if u32_at(zip, at)? != LOCAL_SIGNATURE {
        return None;
    }
    let lengths = u64::from(u16_at(zip, at + 26)?) + u64::from(u16_at(zip, at + 28)?);
    let start = entry.local_header + LOCAL_SIZE as u64 + lengths;
    (start.checked_add(entry.compressed_size)? <= zip.len() as u64).then_some(start)
}

/// The bytes of the library `name` inside the APK `zip` (named `apk` in errors), as the loader maps
/// them: an error, saying what to do, unless the entry exists, is stored uncompressed and begins at
/// a page-aligned offset.
pub fn stored_entry(zip: &[u8], apk: &Path, name: &str) -> Result<Range<usize>, String> {
    let apk = apk.display();
    let entries = entries(zip).map_err(|why| format!("{apk} cannot be read as an APK: {why}"))?;
    let Some(entry) = entries.iter().find(|entry| entry.name == name.as_bytes()) else {
        return Err(format!(
            "{apk} has no entry `{name}` (write its path inside the APK after `!/`, as `unzip -l {apk}` lists it)"
        ));
    };
    if entry.method != 0 {
        return Err(format!(
            "`{name}` is compressed in {apk} (method {}), so no process runs it from the APK: a uprobe \
             needs it stored (method 0); build the APK with uncompressed native libraries \
             (`useLegacyPackaging = false`, then `zipalign -p 4`), or probe the extracted library",
            entry.method
        ));
    }
    let start = data_start(zip, entry).ok_or_else(|| {
        format!("{apk} cannot be read as an APK: the local header of `{name}` is malformed")
    })?;
    if start % PAGE != 0 {
        return Err(format!(
            "`{name}` starts at offset {start:#x} of {apk}, not on a {PAGE}-byte page, so the loader cannot \
             map it from the APK: align the APK's libraries with `zipalign -p 4`"
        ));
    }
    // Bounded by the file's length in `data_start`, so these fit in `usize`.
    Ok(start as usize..(start + entry.compressed_size) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip of `(name, data, method)` entries, each local header padded with an extra field so that the
    /// data starts at a multiple of `align` (as zipalign does); method 8 entries keep their bytes as
    /// they are (only the header matters here).
    fn zip(entries: &[(&str, &[u8], u16)], align: usize) -> Vec<u8> {
        let mut out = vec![];
        let mut central = vec![];
        for &(name, data, method) in entries {
            let header = out.len();
            let unpadded = header + LOCAL_SIZE + name.len();
            let pad = (align - unpadded % align) % align;
            let fields = |out: &mut Vec<u8>, signature: u32| {
                out.extend(signature.to_le_bytes());
                if signature == CENTRAL_SIGNATURE {
                    out.extend(20u16.to_le_bytes());
                }
                out.extend([20, 0, 0, 0]);
                out.extend(method.to_le_bytes());
                out.extend([0; 8]); // time, date, crc
                out.extend((data.len() as u32).to_le_bytes());
                out.extend((data.len() as u32).to_le_bytes());
                out.extend((name.len() as u16).to_le_bytes());
            };
            fields(&mut out, LOCAL_SIGNATURE);
            out.extend((pad as u16).to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(vec![0; pad]);
            out.extend(data);
            fields(&mut central, CENTRAL_SIGNATURE);
            central.extend([0; 12]); // extra, comment, disk, attributes
            central.extend((header as u32).to_le_bytes());
            central.extend(name.as_bytes());
        }
        let offset = out.len();
        out.extend(&central);
        out.extend(END_SIGNATURE.to_le_bytes());
        out.extend([0; 4]);
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend((offset as u32).to_le_bytes());
        out.extend([0; 2]);
        out
    }

    #[test]
    fn finds_stored_aligned_entries_and_refuses_the_rest() {
        let apk = Path::new("base.apk");
        let library = vec![0x7f; 5000];
        let archive =
            zip(&[("AndroidManifest.xml", b"<x/>", 8), ("lib/x86_64/libfoo.so", &library, 0)], 4096);
        let range = stored_entry(&archive, apk, "lib/x86_64/libfoo.so").unwrap();
        assert_eq!(range.start % 4096, 0);
        assert_eq!(&archive[range.clone()], &library[..]);
        let missing = stored_entry(&archive, apk, "lib/x86_64/libbar.so").unwrap_err();
        assert!(missing.contains("no entry `lib/x86_64/libbar.so`"), "{missing}");
        let compressed = stored_entry(&archive, apk, "AndroidManifest.xml").unwrap_err();
        assert!(compressed.contains("is compressed in base.apk (method 8)"), "{compressed}");
        let unaligned = zip(&[("lib/x86_64/libfoo.so", &library, 0)], 1);
        let unaligned = stored_entry(&unaligned, apk, "lib/x86_64/libfoo.so").unwrap_err();
        assert!(
            unaligned.contains("not on a 4096-byte page") && unaligned.contains("zipalign"),
            "{unaligned}"
        );
        assert!(stored_entry(b"not a zip", apk, "x").unwrap_err().contains("not a zip file"));
        assert_eq!(split(Path::new("/a/base.apk!/lib/x.so")), Some((Path::new("/a/base.apk"), "lib/x.so")));
        assert_eq!(file_on_disk(Path::new("/usr/lib/libc.so.6")), Path::new("/usr/lib/libc.so.6"));
    }

    /// Malformed archives (every truncation, and every byte of the headers changed) are errors, never
    /// panics or reads out of bounds.
    #[test]
    fn survives_malformed_archives() {
        let good = zip(&[("a", b"hello", 8), ("lib/b.so", &[1; 300], 0)], 64);
        let apk = Path::new("x.apk");
        for len in 0..good.len() {
            let _ = stored_entry(&good[..len], apk, "lib/b.so");
        }
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for at in 0..good.len() {
            for _ in 0..4 {
                // xorshift: deterministic, no crate needed.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let mut bad = good.clone();
                bad[at] = state as u8;
                let _ = stored_entry(&bad, apk, "lib/b.so");
            }
        }
    }
}
