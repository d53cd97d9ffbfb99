package org.vkattn;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

/**
 * Loads libvkattn_java.so: from the path in the system property
 * {@code org.vkattn.library} if set, else from java.library.path, else from
 * the copies bundled in the jar under /org/vkattn/native/ (extracted to a
 * temporary directory; libvkattn.so is loaded first so that the JNI
 * library's dependency is already satisfied).
 */
final class NativeLoader {
  private static boolean loaded;

  private NativeLoader() {}

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
      if (NativeLoader.class.getResource("/org/vkattn/native/libvkattn_java.so") == null) throw e;
    }
    try {
      File dir = Files.createTempDirectory("vkattn-java").toFile();
      dir.deleteOnExit();
      for (String name : new String[] {"libvkattn.so.0", "libvkattn_java.so"}) {
        File f = new File(dir, name);
        try (InputStream in = NativeLoader.class.getResourceAsStream("/org/vkattn/native/" + name)) {
          if (in == null) throw new UnsatisfiedLinkError("vkattn: " + name + " is not in the jar");
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
