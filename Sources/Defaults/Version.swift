/// The version of cardbench: `cardbench --version`, `cardbenchd --version`, the Debian package's
/// version (packaging/deb.sh reads it from the binary) and the `/v1/health` answer.
public enum CardbenchVersion {
    public static let string = "0.9.0"
}
