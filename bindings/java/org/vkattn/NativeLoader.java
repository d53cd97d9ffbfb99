package org.vkattn;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads the JNI glue (libvkattn_java.so, vkattn_java.dll): from the path in
 * the system property {@code org.vkattn.library} if set, else from
 * java.library.path, else from the copies the jar carries for this platform
 * under /org/vkattn/native/&lt;os&gt;-&lt;arch&gt;/ ({@code linux-x86_64},
 * {@code linux-aarch64}, {@code windows-x86_64}), extracted to a temporary
 * directory; vkattn itself (libvkattn.so.0, vkattn.dll) is loaded first so
 * that the glue's dependency is already satisfied. A jar without this
 * platform's libraries throws UnsatisfiedLinkError naming the platform.
 */
final class NativeLoader {
  private static boolean loaded;

  private NativeLoader() {}

  /** This JVM's platform as the jar names it, e.g. "linux-x86_64". */
  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    os = os.startsWith("windows") ? "windows" : os.startsWith("linux") ? "linux" : os;
    if (arch.equals("amd64") || arch.equals("x86-64")) arch = "x86_64";
    if (arch.equals("arm64")) arch = "aarch64";
    return os + "-" + arch;
  }

  static synchronized void load() {
    if (loaded) return;
    String explicit = System.getProperty("org.vkattn.library");
    if (explicit != null) {
      System.load(new File(explicit).getAbsolutePath());
      loaded = true;
      return;
    }
    try {
      System.loadLibrary("vkattn_java");
      loaded = true;
      return;
    } catch (UnsatisfiedLinkError e) {
      if (NativeLoader.class.getResource("/org/vkattn/native/") == null) throw e;
    }
    String platform = platform();
    String[] names =
        platform.startsWith("windows-")
            ? new String[] {"vkattn.dll", "vkattn_java.dll"}
            : new String[] {"libvkattn.so.0", "libvkattn_java.so"};
    String dirInJar = "/org/vkattn/native/" + platform + "/";
    if (NativeLoader.class.getResource(dirInJar + names[1]) == null)
      throw new UnsatisfiedLinkError(
          "vkattn: this jar has no native library for "
              + platform
              + " (os.name "
              + System.getProperty("os.name")
              + ", os.arch "
              + System.getProperty("os.arch")
              + "; it carries linux-x86_64, linux-aarch64 and windows-x86_64 where built so)");
    try {
      File dir = Files.createTempDirectory("vkattn-java").toFile();
      dir.deleteOnExit();
      for (String name : names) {
        File f = new File(dir, name);
        try (InputStream in = NativeLoader.class.getResourceAsStream(dirInJar + name)) {
          if (in == null) throw new UnsatisfiedLinkError("vkattn: " + dirInJar + name + " is not in the jar");
          Files.copy(in, f.toPath(), StandardCopyOption.REPLACE_EXISTING);
        }
        f.deleteOnExit();
        System.load(f.getAbsolutePath());
      }
      loaded = true;
    } catch (IOException e) {
      UnsatisfiedLinkError err = new UnsatisfiedLinkError("vkattn: cannot extract the native library");
      err.initCause(e);
      throw err;
    }
  }
}
